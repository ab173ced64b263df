"""llamacpp engine: llama.cpp (through llama-cpp-python's C bindings) on a GGUF file.

llama-cpp-python's `Llama` class decodes one sequence per context. This engine uses the
library underneath it instead, the way llama.cpp's own server does: one context whose KV
cache holds up to `max_batch_size` sequences, and one `llama_decode` per step over a
`llama_batch` that carries the next token of every running request (and chunks of newly
admitted prompts), each tagged with its sequence id. Every request has its own sampler chain
(penalties, top-k, top-p, temperature, seeded distribution, or greedy), so sampling stays
per request while the weights are read once per step for all of them.
"""

from __future__ import annotations

import codecs
import ctypes
import logging
import random
from dataclasses import dataclass
from typing import Any, ClassVar

from services.generator.backends.base import EngineInfo, Message
from services.generator.chat_template import gguf_encode, gguf_formatter, gguf_render
from services.generator.scheduler import BatchModel, LocalEngine, Sequence
from services.generator.settings import GeneratorSettings
from shared.errors import FailedPrecondition
from shared.models.generator_files import configured_model, cpu_threads

log = logging.getLogger(__name__)

# Repetition penalty looks this far back (llama.cpp's default), prompt tail included.
PENALTY_LAST_N = 64
_RANDOM_SEED = 0xFFFFFFFF  # LLAMA_DEFAULT_SEED: llama.cpp picks a random seed for this value


@dataclass
class _SeqState:
    seq_id: int
    sampler: Any  # llama_sampler_p
    position: int = 0  # tokens of this sequence in the KV cache
    last: int = -1  # sampled, not yet in the KV cache
    decoder: codecs.IncrementalDecoder | None = None


class LlamaCppModel(BatchModel):
    def __init__(self, path: str, settings: GeneratorSettings) -> None:
        import llama_cpp
        from llama_cpp import _internals

        self.lib = llama_cpp
        llama_cpp.llama_backend_init()
        model_params = llama_cpp.llama_model_default_params()
        self.model = _internals.LlamaModel(path_model=path, params=model_params, verbose=False)
        self.vocab = self.model.vocab
        self.n_vocab = self.model.n_vocab()
        trained = self.model.n_ctx_train()
        self.context_length = settings.context_length or trained
        if self.context_length > trained:
            raise FailedPrecondition(
                f"RAGRAIL_GENERATOR_CONTEXT_LENGTH={settings.context_length} exceeds the "
                f"{trained} tokens {path} was trained on; use at most {trained}, or 0"
            )
        self.max_batch = settings.max_batch_size
        self.kv_tokens = settings.kv_cache_tokens or self.context_length * self.max_batch
        self.kv_tokens = max(self.kv_tokens, self.context_length)
        # One decode call holds a token of every running request plus prompt chunks.
        self.n_batch = max(settings.prefill_chunk, self.max_batch)
        self.threads = cpu_threads(settings.threads)
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = self.kv_tokens
        params.n_batch = self.n_batch
        params.n_ubatch = self.n_batch
        params.n_seq_max = self.max_batch
        # One KV buffer shared by all sequences: a request may use any free cell, so the
        # scheduler's token budget (prompt + max_tokens per request) is the only limit.
        params.kv_unified = True
        params.n_threads = self.threads
        params.n_threads_batch = self.threads
        params.no_perf = True
        self.ctx = _internals.LlamaContext(model=self.model, params=params, verbose=False)
        self.memory = llama_cpp.llama_get_memory(self.ctx.ctx)
        self.batch = _internals.LlamaBatch(n_tokens=self.n_batch, embd=0, n_seq_max=1)
        self.free_ids = list(range(self.max_batch))
        self._piece = ctypes.create_string_buffer(256)
        self.metadata = self.model.metadata()
        self._warm_up()

    def _warm_up(self) -> None:
        """One decode before the port opens: llama.cpp sizes its compute buffers on the first
        call, which took seconds here, and that must not land on the first request."""
        raw = self.batch.batch
        raw.n_tokens = 1
        raw.token[0] = self.model.token_bos() if self.model.token_bos() >= 0 else 0
        raw.pos[0] = 0
        raw.n_seq_id[0] = 1
        raw.seq_id[0][0] = 0
        raw.logits[0] = True
        if self.lib.llama_decode(self.ctx.ctx, raw) != 0:
            raise FailedPrecondition(f"llama.cpp could not run {self.model.path_model}")
        self.lib.llama_memory_seq_rm(self.memory, 0, -1, -1)

    # -- scheduler side -------------------------------------------------------------------

    def _sampler(self, seq: Sequence) -> Any:
        lib = self.lib
        sampling = seq.request.sampling
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if sampling.repetition_penalty != 1.0:
            lib.llama_sampler_chain_add(
                chain,
                lib.llama_sampler_init_penalties(
                    self.n_vocab, PENALTY_LAST_N, sampling.repetition_penalty, 0.0, 0.0
                ),
            )
        if sampling.greedy:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
            return chain
        if sampling.top_k:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_k(sampling.top_k))
        if sampling.top_p < 1.0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(sampling.top_p, 1))
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(sampling.temperature))
        seed = random.getrandbits(32) if sampling.seed is None else sampling.seed & 0xFFFFFFFF
        if seed == _RANDOM_SEED:
            seed -= 1
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(seed))
        return chain

    def add(self, seq: Sequence) -> None:
        state = _SeqState(self.free_ids.pop(), self._sampler(seq))
        state.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        if seq.request.sampling.repetition_penalty != 1.0:
            for token in seq.prompt_ids[-PENALTY_LAST_N:]:
                self.lib.llama_sampler_accept(state.sampler, token)
        seq.state = state

    def remove(self, seq: Sequence) -> None:
        state: _SeqState | None = seq.state
        if state is None:
            return
        self.lib.llama_memory_seq_rm(self.memory, state.seq_id, -1, -1)
        self.lib.llama_sampler_free(state.sampler)
        self.free_ids.append(state.seq_id)
        seq.state = None

    def step(self, seqs: list[Sequence]) -> list[int | None]:
        raw = self.batch.batch
        n = 0
        sample_at: list[int | None] = [None] * len(seqs)

        def put(token: int, state: _SeqState, logits: bool) -> None:
            nonlocal n
            raw.token[n] = token
            raw.pos[n] = state.position
            raw.n_seq_id[n] = 1
            raw.seq_id[n][0] = state.seq_id
            raw.logits[n] = logits
            state.position += 1
            n += 1

        # Running answers first (one token each), then prompts in the room that is left.
        for i, seq in enumerate(seqs):
            if seq.prefilled == len(seq.prompt_ids):
                sample_at[i] = n
                put(seq.state.last, seq.state, True)
        for i, seq in enumerate(seqs):
            left = len(seq.prompt_ids) - seq.prefilled
            if not left or n >= self.n_batch:
                continue
            take = min(left, self.n_batch - n)
            for token in seq.prompt_ids[seq.prefilled : seq.prefilled + take - 1]:
                put(token, seq.state, False)
            done = take == left
            if done:
                sample_at[i] = n
            put(seq.prompt_ids[seq.prefilled + take - 1], seq.state, done)
            seq.prefilled += take
        raw.n_tokens = n
        code = self.lib.llama_decode(self.ctx.ctx, raw)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code} for a batch of {n} tokens")
        out: list[int | None] = []
        for seq, index in zip(seqs, sample_at, strict=True):
            if index is None:
                out.append(None)
                continue
            token = self.lib.llama_sampler_sample(seq.state.sampler, self.ctx.ctx, index)
            seq.state.last = token
            out.append(token)
        return out

    def is_end(self, token: int) -> bool:
        return bool(self.lib.llama_vocab_is_eog(self.vocab, token))

    def piece(self, token: int) -> bytes:
        n = self.lib.llama_token_to_piece(
            self.vocab, token, self._piece, len(self._piece), 0, False
        )
        return self._piece.raw[: max(n, 0)]

    def detokenize(self, seq: Sequence, token: int) -> str:
        return seq.state.decoder.decode(self.piece(token))

    def flush(self, seq: Sequence) -> str:
        return seq.state.decoder.decode(b"", final=True)

    def close(self) -> None:
        self.batch.close()
        self.ctx.close()
        self.model.close()


class LlamaCppEngine(LocalEngine):
    name: ClassVar[str] = "llamacpp"

    def __init__(self, settings: GeneratorSettings) -> None:
        path = configured_model(settings.model)
        if not path.is_file():
            raise FailedPrecondition(
                f"RAGRAIL_GENERATOR_MODEL={path} is not a file; the llamacpp engine loads a "
                ".gguf file (a Hugging Face directory needs RAGRAIL_GENERATOR_ENGINE=torch)"
            )
        self.path = path
        self.model = LlamaCppModel(str(path), settings)
        self.formatter = gguf_formatter(self.model.model, path)
        self.schedule(self.model, settings, self.model.kv_tokens, self.model.context_length)
        log.info(
            "llama.cpp model loaded",
            extra={
                "model": str(path),
                "context_length": self.model.context_length,
                "kv_cache_tokens": self.model.kv_tokens,
                "threads": self.model.threads,
            },
        )

    def info(self) -> EngineInfo:
        return EngineInfo(
            engine=self.name,
            model=str(self.path),
            context_length=self.model.context_length,
            details={
                "device": "cpu",
                "threads": str(self.model.threads),
                **self.scheduler_details(),
            },
        )

    def render_chat(self, messages: list[Message]) -> str:
        return gguf_render(self.formatter, messages)

    def tokenize(self, text: str, *, chat: bool) -> list[int]:
        return gguf_encode(self.model.model, text, chat)

    async def close(self) -> None:
        await super().close()
        self.model.close()
