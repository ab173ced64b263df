"""The guard model in PyTorch: MiniLM with a shared frozen bottom and two tops.

    tokens ─ embeddings ─ layers 0..L-1 (frozen) ─┬─ layers L..5 as packaged ─ mean ─ "embedding"
                                                  └─ layers L..5 fine-tuned ─ heads ─ "logits"

The packaged all-MiniLM-L6-v2 is a plain BERT (6 post-LayerNorm layers, 384 wide, 12
heads, exact GELU); it is re-implemented here in a few lines rather than through
transformers' BertModel so the graph that is trained, the one exported to ONNX and the
bottom that is cached are the same code (transformers' attention and mask helpers change
between releases; `test_guard_model_matches_sentence_transformers` pins the equivalence).

Why this shape:
* training on 2 CPU cores in minutes: the bottom is frozen, so it runs once per text
  (`bottom states` are cached, INT8 ONNX) and only the top layers and heads are trained;
* serving: one ONNX run gives both the guard logits (injection, unsafe + category,
  planted instruction in a document) and the packaged model's sentence embedding that the
  topic and groundedness rails use, for 8/6 of one MiniLM pass instead of two passes.

Each head pools the top's token states two ways, mean and a learned attention (one query
per head), so a short planted instruction is not averaged away in a 500-character window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

HIDDEN, HEADS, FFN, LAYERS, EPS = 384, 12, 1536, 6, 1e-12


class Embeddings(nn.Module):
    def __init__(self, vocab: int, positions: int, types: int) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, HIDDEN)
        self.position = nn.Embedding(positions, HIDDEN)
        self.token_type = nn.Embedding(types, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN, eps=EPS)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :]
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        return self.norm(x)


class Layer(nn.Module):
    """One BERT layer (post-LayerNorm), weight names as in BertLayer's state dict."""

    def __init__(self, dropout: float = 0.1) -> None:
        super().__init__()
        self.query, self.key, self.value = (nn.Linear(HIDDEN, HIDDEN) for _ in range(3))
        self.attention_out = nn.Linear(HIDDEN, HIDDEN)
        self.attention_norm = nn.LayerNorm(HIDDEN, eps=EPS)
        self.intermediate = nn.Linear(HIDDEN, FFN)
        self.output = nn.Linear(FFN, HIDDEN)
        self.output_norm = nn.LayerNorm(HIDDEN, eps=EPS)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """x (batch, length, 384); bias (batch, 1, 1, length): 0 for tokens, very negative
        for padding."""
        b, n, _ = x.shape
        size = HIDDEN // HEADS

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, HEADS, size).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        weights = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(size)) + bias
        weights = self.dropout(weights.softmax(-1))
        context = (weights @ v).transpose(1, 2).reshape(b, n, HIDDEN)
        x = self.attention_norm(x + self.dropout(self.attention_out(context)))
        hidden = nn.functional.gelu(self.intermediate(x))
        return self.output_norm(x + self.dropout(self.output(hidden)))


LAYER_KEYS = {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "attention_out": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "intermediate": "intermediate.dense",
    "output": "output.dense",
    "output_norm": "output.LayerNorm",
}


def mask_bias(attention_mask: torch.Tensor) -> torch.Tensor:
    # -1e4, not the dtype's minimum: the exported graph stays finite in INT8 and FP16.
    return (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask[:, :, None].to(x.dtype)
    return (x * m).sum(1) / m.sum(1).clamp(min=1e-9)


@dataclass(frozen=True)
class HeadSpec:
    """A head: `outputs` logits from its own pooled view of the token states."""

    name: str
    outputs: int


class Heads(nn.Module):
    """Per head: mean pooling and attention pooling (softmax over tokens of x . query),
    concatenated, then a linear layer to the head's logits. All heads' logits are returned
    side by side, in `specs` order."""

    def __init__(self, specs: list[HeadSpec]) -> None:
        super().__init__()
        self.specs = specs
        self.queries = nn.Parameter(torch.zeros(len(specs), HIDDEN))
        self.norm = nn.LayerNorm(2 * HIDDEN)
        self.linears = nn.ModuleList(nn.Linear(2 * HIDDEN, s.outputs) for s in specs)
        for linear in self.linears:
            nn.init.zeros_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        mean = masked_mean(x, mask)
        # (batch, heads, length): one attention distribution per head.
        scores = torch.einsum("bnd,hd->bhn", x, self.queries) / math.sqrt(HIDDEN)
        scores = scores + (1.0 - mask[:, None, :].to(x.dtype)) * -10000.0
        pooled = torch.einsum("bhn,bnd->bhd", scores.softmax(-1), x)
        outs = []
        for i, linear in enumerate(self.linears):
            features = self.norm(torch.cat([mean, pooled[:, i]], dim=-1))
            outs.append(linear(features))
        return torch.cat(outs, dim=-1)


class GuardModel(nn.Module):
    """Bottom (frozen), packaged top (frozen) and guard top (trained) plus heads."""

    def __init__(
        self,
        frozen_layers: int,
        specs: list[HeadSpec],
        vocab: int = 30522,
        positions: int = 512,
        types: int = 2,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        if not 0 <= frozen_layers <= LAYERS:
            raise ValueError(f"frozen_layers must be 0..{LAYERS}")
        self.frozen_layers = frozen_layers
        self.embeddings = Embeddings(vocab, positions, types)
        self.bottom = nn.ModuleList(Layer(dropout) for _ in range(frozen_layers))
        self.base_top = nn.ModuleList(Layer(dropout) for _ in range(LAYERS - frozen_layers))
        self.guard_top = nn.ModuleList(Layer(dropout) for _ in range(LAYERS - frozen_layers))
        self.heads = Heads(specs)
        for module in (self.embeddings, self.bottom, self.base_top):
            for p in module.parameters():
                p.requires_grad = False

    @classmethod
    def from_minilm(
        cls, path: Path, frozen_layers: int, specs: list[HeadSpec], dropout: float = 0.1
    ) -> GuardModel:
        """Weights of the packaged sentence-transformers MiniLM (model.safetensors); the
        guard top starts as a copy of the packaged top."""
        import json

        from safetensors.torch import load_file

        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        if (config.get("hidden_size"), config.get("num_hidden_layers")) != (HIDDEN, LAYERS):
            raise SystemExit(f"{path}: not a 6-layer, 384-wide MiniLM (config.json)")
        model = cls(
            frozen_layers,
            specs,
            config["vocab_size"],
            config["max_position_embeddings"],
            config["type_vocab_size"],
            dropout,
        )
        state = load_file(str(path / "model.safetensors"))
        state = {k.removeprefix("bert."): v for k, v in state.items()}
        emb = model.embeddings
        emb.word.weight.data.copy_(state["embeddings.word_embeddings.weight"])
        emb.position.weight.data.copy_(state["embeddings.position_embeddings.weight"])
        emb.token_type.weight.data.copy_(state["embeddings.token_type_embeddings.weight"])
        emb.norm.weight.data.copy_(state["embeddings.LayerNorm.weight"])
        emb.norm.bias.data.copy_(state["embeddings.LayerNorm.bias"])
        for i in range(LAYERS):
            targets = (
                [model.bottom[i]]
                if i < frozen_layers
                else [model.base_top[i - frozen_layers], model.guard_top[i - frozen_layers]]
            )
            for layer in targets:
                for name, key in LAYER_KEYS.items():
                    module = getattr(layer, name)
                    module.weight.data.copy_(state[f"encoder.layer.{i}.{key}.weight"])
                    module.bias.data.copy_(state[f"encoder.layer.{i}.{key}.bias"])
        return model

    def bottom_states(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        x = self.embeddings(input_ids, token_type_ids)
        bias = mask_bias(attention_mask)
        for layer in self.bottom:
            x = layer(x, bias)
        return x

    def guard_logits(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Heads' logits from bottom states (what training runs, on cached states)."""
        bias = mask_bias(attention_mask)
        x = states
        for layer in self.guard_top:
            x = layer(x, bias)
        return self.heads(x, attention_mask)

    def base_hidden(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The packaged MiniLM's last_hidden_state from bottom states (its own top layers)."""
        bias = mask_bias(attention_mask)
        x = states
        for layer in self.base_top:
            x = layer(x, bias)
        return x

    def embedding(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.base_hidden(states, attention_mask)
        return nn.functional.normalize(masked_mean(hidden, attention_mask), dim=-1)

    def trainable(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]


class Exported(nn.Module):
    """Export wrapper: tokens through the model's frozen bottom, then the wrapper's `outputs`
    of those states."""

    def __init__(self, model: GuardModel) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> Any:
        states = self.model.bottom_states(input_ids, attention_mask, token_type_ids)
        return self.outputs(states, attention_mask)

    def outputs(self, states: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        raise NotImplementedError


class Bottom(Exported):
    """Export wrapper: the frozen bottom alone (its INT8 ONNX computes the cached states)."""

    def outputs(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return states


class Served(Exported):
    """Export wrapper: what the service runs, tokens to (embedding, logits)."""

    def outputs(
        self, states: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return (
            self.model.embedding(states, attention_mask),
            self.model.guard_logits(states, attention_mask),
        )


class BaseHidden(Exported):
    """Export wrapper: the packaged MiniLM alone, tokens to last_hidden_state (pooled by the
    model layer's OnnxEncoder, as the embedder's ONNX export): the sentence encoder of the
    groundedness rail, which embeds many context windows and needs no guard logits."""

    def outputs(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model.base_hidden(states, attention_mask)


INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def export(module: nn.Module, file: Path, outputs: list[str], opset: int = 17) -> None:
    """ONNX with batch and sequence axes dynamic."""
    module.eval()
    example = (
        torch.ones(2, 8, dtype=torch.long),
        torch.ones(2, 8, dtype=torch.long),
        torch.zeros(2, 8, dtype=torch.long),
    )
    axes: dict[str, Any] = {name: {0: "batch", 1: "sequence"} for name in INPUTS}
    for name in outputs:
        sequence = name in ("states", "last_hidden_state")
        axes[name] = {0: "batch", 1: "sequence"} if sequence else {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(
            module,
            example,
            str(file),
            input_names=list(INPUTS),
            output_names=outputs,
            dynamic_axes=axes,
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
