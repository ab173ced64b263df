"""torch engine: a Hugging Face causal LM on PyTorch (CPU or CUDA), optionally with a LoRA
adapter from peft, under the continuous-batching scheduler.

The batch's KV cache is one transformers `DynamicCache` whose rows are the running requests,
left-padded to a common length (an attention mask hides the padding; position ids are each
row's own). A step is one forward pass of every running request's last token. A new request
reads its prompt into a cache of its own, in chunks of `prefill_chunk` tokens between decode
steps, and is then merged into the batch (the shorter side padded on the left); a finished
one is cut out of it, and columns that have become padding in every row are dropped.

Sampling runs per row on the step's logits, in transformers' order: repetition penalty over
the prompt and answer so far, then temperature, top-k, top-p, and a draw from a
`torch.Generator` seeded per request (greedy when temperature is 0).
"""

from __future__ import annotations

import copy
import logging
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from services.generator.backends.base import EngineInfo, Message, Sampling
from services.generator.chat_template import hf_encode, hf_render
from services.generator.scheduler import BatchModel, LocalEngine, Sequence
from services.generator.settings import GeneratorSettings
from shared.backends import resolve_torch_device
from shared.errors import FailedPrecondition
from shared.models.generator_files import configured_model, cpu_threads

log = logging.getLogger(__name__)


@dataclass
class _SeqState:
    generator: Any  # torch.Generator
    seen: Any = None  # bool tensor (vocab,) for the repetition penalty; None when it is off
    cache: Any = None  # the prompt's own DynamicCache until the request joins the batch
    position: int = 0  # tokens of this request in the KV cache
    last: int = -1  # sampled, not yet in the KV cache
    ids: list[int] = field(default_factory=list)  # answer so far, for detokenizing
    prefix_offset: int = 0
    read_offset: int = 0


def _dtype(name: str, device: str) -> Any:
    import torch

    if name == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, name)


def load_hf(path: Path, dtype: Any, adapter: str) -> tuple[Any, Any]:
    """(model, tokenizer) from a model directory or a .gguf file (de-quantized to dtype), with
    a LoRA adapter merged into the weights when `adapter` names one."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if path.is_file():
        if path.suffix != ".gguf":
            raise FailedPrecondition(
                f"RAGRAIL_GENERATOR_MODEL={path} is a file but not a .gguf; the torch engine "
                "loads a Hugging Face model directory or a GGUF file"
            )
        where, extra = str(path.parent), {"gguf_file": path.name}
    else:
        if not (path / "config.json").is_file():
            raise FailedPrecondition(
                f"{path} has no config.json; the torch engine loads a Hugging Face model "
                "directory (save_pretrained) or a .gguf file"
            )
        where, extra = str(path), {}
    tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=True, **extra)
    model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype, local_files_only=True, **extra)
    if adapter:
        model = merge_adapter(model, Path(adapter).expanduser())
    return model, tokenizer


def merge_adapter(model: Any, adapter: Path) -> Any:
    """The model with a peft LoRA adapter folded into its weights: it then runs at the base
    model's speed, and batches mix freely."""
    if not (adapter / "adapter_config.json").is_file():
        raise FailedPrecondition(
            f"RAGRAIL_GENERATOR_ADAPTER={adapter} has no adapter_config.json; point it at a "
            "directory written by peft's save_pretrained (trainers/ writes one per run)"
        )
    try:
        from peft import PeftModel
    except ModuleNotFoundError as exc:
        raise FailedPrecondition(
            "RAGRAIL_GENERATOR_ADAPTER needs the Python package peft; install the generator "
            "extra (constraints.txt pins it)"
        ) from exc
    try:
        peft_model = PeftModel.from_pretrained(model, str(adapter), is_trainable=False)
    except (ValueError, RuntimeError, KeyError) as exc:
        raise FailedPrecondition(
            f"the LoRA adapter in {adapter} does not fit the model ({exc}); was it trained on "
            "this base model?"
        ) from exc
    return peft_model.merge_and_unload()


class TorchModel(BatchModel):
    def __init__(self, settings: GeneratorSettings) -> None:
        import torch

        self.torch = torch
        self.path = configured_model(settings.model)
        self.device = resolve_torch_device(settings.device, "RAGRAIL_GENERATOR_DEVICE")
        self.threads = cpu_threads(settings.threads)
        if self.device == "cpu":
            torch.set_num_threads(self.threads)
        self.dtype = _dtype(settings.dtype, self.device)
        model, self.tokenizer = load_hf(self.path, self.dtype, settings.adapter)
        self.model = model.to(self.device).eval()
        if self.tokenizer.chat_template is None:
            raise FailedPrecondition(
                f"{self.path} has no chat template; the generator needs an instruct model"
            )
        # The scheduler thread detokenizes with its own copy: a fast tokenizer shared across
        # threads can fail with "Already borrowed".
        self.decoder = copy.deepcopy(self.tokenizer)
        self.tokenizer_lock = threading.Lock()
        config = self.model.config.get_text_config(decoder=True)
        trained = int(getattr(config, "max_position_embeddings", 0) or 2048)
        self.context_length = settings.context_length or trained
        if self.context_length > trained:
            raise FailedPrecondition(
                f"RAGRAIL_GENERATOR_CONTEXT_LENGTH={settings.context_length} exceeds the model's "
                f"{trained} positions; use at most {trained}, or 0"
            )
        self.kv_tokens = max(
            settings.kv_cache_tokens or self.context_length * settings.max_batch_size,
            self.context_length,
        )
        self._check_cache_layout()
        self.vocab = int(self.model.get_output_embeddings().weight.shape[0])
        self.end_ids = self._end_ids()
        self.prefill_chunk = settings.prefill_chunk
        self.adapter = settings.adapter
        # The batch: requests in cache-row order, their KV cache and attention mask.
        self.rows: list[Sequence] = []
        self.cache: Any = None
        self.mask: Any = None

    def _check_cache_layout(self) -> None:
        """The batch cache is cut and padded per row, which only full-attention layers allow;
        sliding-window or recurrent layers (Mistral, Gemma 2/3, hybrids) would be corrupted."""
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        layers = DynamicCache(config=self.model.config).layers
        odd = sorted({type(layer).__name__ for layer in layers if type(layer) is not DynamicLayer})
        if odd:
            raise FailedPrecondition(
                f"{self.path} uses {', '.join(odd)} cache layers; the torch engine batches "
                "models whose layers all use full attention (Llama, Qwen2, SmolLM, Phi-3...). "
                "Serve this one with the llamacpp engine (as GGUF) or Triton"
            )

    def _end_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (self.model.generation_config.eos_token_id, self.tokenizer.eos_token_id):
            if isinstance(source, int):
                ids.add(source)
            elif source:
                ids.update(int(i) for i in source)
        # Chat models end a turn with their template's end token, which some configurations
        # list only as a special token.
        for name in ("<|im_end|>", "<|eot_id|>", "<|end|>"):
            token = self.tokenizer.convert_tokens_to_ids(name)
            if isinstance(token, int) and token != self.tokenizer.unk_token_id:
                ids.add(token)
        return ids

    # -- tokenizer (worker threads) -------------------------------------------------------

    def render(self, messages: list[Message]) -> str:
        with self.tokenizer_lock:
            return hf_render(self.tokenizer, messages)

    def encode(self, text: str, chat: bool) -> list[int]:
        with self.tokenizer_lock:
            return hf_encode(self.tokenizer, text, chat)

    # -- scheduler thread -----------------------------------------------------------------

    def add(self, seq: Sequence) -> None:
        torch = self.torch
        sampling = seq.request.sampling
        seed = random.getrandbits(63) if sampling.seed is None else sampling.seed
        generator = torch.Generator(device=self.device).manual_seed(seed & (2**63 - 1))
        state = _SeqState(generator)
        if sampling.repetition_penalty != 1.0:
            state.seen = torch.zeros(self.vocab, dtype=torch.bool, device=self.device)
            state.seen[list(seq.prompt_ids)] = True
        seq.state = state

    def remove(self, seq: Sequence) -> None:
        if seq in self.rows:
            index = self.rows.index(seq)
            self.rows.pop(index)
            if not self.rows:
                self.cache = self.mask = None
            else:
                keep = [i for i in range(self.mask.shape[0]) if i != index]
                self._select(keep)
        seq.state = None

    def _layers(self) -> list[Any]:
        return list(self.cache.layers)

    def _select(self, keep: list[int]) -> None:
        """Keeps cache rows `keep`, then drops leading columns that are padding in every row."""
        torch = self.torch
        rows = torch.tensor(keep, device=self.device)
        self.mask = self.mask.index_select(0, rows)
        first = int(self.mask.argmax(dim=1).min())  # earliest real token over all rows
        for layer in self._layers():
            layer.keys = layer.keys.index_select(0, rows)[..., first:, :]
            layer.values = layer.values.index_select(0, rows)[..., first:, :]
        self.mask = self.mask[:, first:]

    def _merge(self, seq: Sequence) -> None:
        """Adds a request whose prompt is read into its own cache to the batch."""
        torch = self.torch
        pad = torch.nn.functional.pad
        own = seq.state.cache
        seq.state.cache = None
        length = own.get_seq_length()
        mask = torch.ones(1, length, dtype=torch.long, device=self.device)
        if self.cache is None:
            self.cache, self.mask = own, mask
        else:
            width = self.mask.shape[1]
            grow, shift = max(length - width, 0), max(width - length, 0)
            for mine, theirs in zip(self._layers(), list(own.layers), strict=True):
                mine.keys = torch.cat(
                    [pad(mine.keys, (0, 0, grow, 0)), pad(theirs.keys, (0, 0, shift, 0))]
                )
                mine.values = torch.cat(
                    [pad(mine.values, (0, 0, grow, 0)), pad(theirs.values, (0, 0, shift, 0))]
                )
            self.mask = torch.cat([pad(self.mask, (grow, 0)), pad(mask, (shift, 0))])
        self.rows.append(seq)

    def step(self, seqs: list[Sequence]) -> list[int | None]:
        with self.torch.inference_mode():
            sampled: dict[int, int] = {}
            if self.rows:
                for seq, token in zip(self.rows, self._decode(), strict=True):
                    sampled[id(seq)] = token
            budget = self.prefill_chunk
            for seq in seqs:
                if budget <= 0:
                    break
                if seq.prefilled < len(seq.prompt_ids):
                    token, used = self._prefill(seq, budget)
                    budget -= used
                    if token is not None:
                        sampled[id(seq)] = token
        return [sampled.get(id(seq)) for seq in seqs]

    def _decode(self) -> list[int]:
        torch = self.torch
        inputs = torch.tensor([[s.state.last] for s in self.rows], device=self.device)
        positions = torch.tensor([[s.state.position] for s in self.rows], device=self.device)
        ones = torch.ones(len(self.rows), 1, dtype=torch.long, device=self.device)
        self.mask = torch.cat([self.mask, ones], dim=1)
        logits = self.model(
            input_ids=inputs,
            attention_mask=self.mask,
            position_ids=positions,
            past_key_values=self.cache,
            use_cache=True,
        ).logits[:, -1, :]
        for seq in self.rows:
            seq.state.position += 1
        # Greedy rows without a penalty take one argmax over the batch and one transfer,
        # not one device sync per row (which dominates a step on a GPU).
        plain = [
            i for i, s in enumerate(self.rows) if s.request.sampling.greedy and s.state.seen is None
        ]
        tokens: list[int] = [0] * len(self.rows)
        if plain:
            picks = logits[plain].argmax(dim=-1).tolist()
            for row, token in zip(plain, picks, strict=True):
                tokens[row] = self.rows[row].state.last = int(token)
        done = set(plain)
        for row, seq in enumerate(self.rows):
            if row not in done:
                tokens[row] = self._sample(seq, logits[row])
        return tokens

    def _prefill(self, seq: Sequence, budget: int) -> tuple[int | None, int]:
        """Reads up to `budget` prompt tokens; the first answer token once the prompt is in."""
        torch = self.torch
        from transformers import DynamicCache

        state = seq.state
        if state.cache is None:
            state.cache = DynamicCache(config=self.model.config)
        start = seq.prefilled
        end = min(len(seq.prompt_ids), start + budget)
        ids = torch.tensor([seq.prompt_ids[start:end]], device=self.device)
        logits = self.model(
            input_ids=ids,
            position_ids=torch.arange(start, end, device=self.device).unsqueeze(0),
            past_key_values=state.cache,
            use_cache=True,
            logits_to_keep=1,
        ).logits[0, -1, :]
        seq.prefilled = end
        state.position = end
        if end < len(seq.prompt_ids):
            return None, end - start
        token = self._sample(seq, logits)
        self._merge(seq)
        return token, end - start

    def _sample(self, seq: Sequence, logits: Any) -> int:
        torch = self.torch
        sampling: Sampling = seq.request.sampling
        state: _SeqState = seq.state
        scores = logits.float()
        if state.seen is not None:
            penalty = sampling.repetition_penalty
            seen = scores[state.seen]
            scores[state.seen] = torch.where(seen < 0, seen * penalty, seen / penalty)
        if sampling.greedy:
            token = int(scores.argmax())
        else:
            scores = scores / sampling.temperature
            if sampling.top_k and sampling.top_k < scores.shape[0]:
                kth = torch.topk(scores, sampling.top_k).values[-1]
                scores = scores.masked_fill(scores < kth, float("-inf"))
            if sampling.top_p < 1.0:
                ordered, order = torch.sort(scores, descending=True)
                cumulative = ordered.softmax(-1).cumsum(-1)
                # Drop tokens once the ones before them already cover top_p; keep the first.
                drop = cumulative - ordered.softmax(-1) >= sampling.top_p
                drop[0] = False
                scores = scores.index_fill(0, order[drop], float("-inf"))
            probs = scores.softmax(-1)
            token = int(torch.multinomial(probs, 1, generator=state.generator))
        state.last = token
        if state.seen is not None:
            state.seen[token] = True
        return token

    def is_end(self, token: int) -> bool:
        return token in self.end_ids

    def detokenize(self, seq: Sequence, token: int) -> str:
        """Incremental decoding: the text of the last few tokens, minus what was already sent,
        held back while it ends in an incomplete character."""
        state: _SeqState = seq.state
        state.ids.append(token)
        before = self.decoder.decode(
            state.ids[state.prefix_offset : state.read_offset], skip_special_tokens=True
        )
        after = self.decoder.decode(state.ids[state.prefix_offset :], skip_special_tokens=True)
        if len(after) > len(before) and not after.endswith("\ufffd"):
            state.prefix_offset, state.read_offset = state.read_offset, len(state.ids)
            return after[len(before) :]
        return ""

    def flush(self, seq: Sequence) -> str:
        state: _SeqState = seq.state
        before = self.decoder.decode(
            state.ids[state.prefix_offset : state.read_offset], skip_special_tokens=True
        )
        after = self.decoder.decode(state.ids[state.prefix_offset :], skip_special_tokens=True)
        state.prefix_offset = state.read_offset = len(state.ids)
        return after[len(before) :]


class TorchEngine(LocalEngine):
    name: ClassVar[str] = "torch"

    def __init__(self, settings: GeneratorSettings) -> None:
        self.model = TorchModel(settings)
        self.schedule(self.model, settings, self.model.kv_tokens, self.model.context_length)
        log.info(
            "torch model loaded",
            extra={
                "model": str(self.model.path),
                "adapter": settings.adapter,
                "device": self.model.device,
                "dtype": str(self.model.dtype).removeprefix("torch."),
                "context_length": self.model.context_length,
            },
        )

    def info(self) -> EngineInfo:
        details = {
            "device": self.model.device,
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "threads": str(self.model.threads),
            **self.scheduler_details(),
        }
        if self.model.adapter:
            details["adapter"] = self.model.adapter
        return EngineInfo(
            engine=self.name,
            model=str(self.model.path),
            context_length=self.model.context_length,
            details=details,
        )

    def render_chat(self, messages: list[Message]) -> str:
        return self.model.render(messages)

    def tokenize(self, text: str, *, chat: bool) -> list[int]:
        return self.model.encode(text, chat)
