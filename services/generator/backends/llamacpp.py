"""llamacpp engine: llama.cpp (through llama-cpp-python's C bindings) on a GGUF file.

llama-cpp-python's `Llama` class decodes one sequence per context. This engine uses the
library underneath it instead, the way llama.cpp's own server does: one context with a slot
per running request (`max_batch_size` of them), each slot a KV cache stream of its own
(`context_length` cells), and one `llama_decode` per step that carries the next token of
every running request, each tagged with its slot's sequence id. Every request has its own
sampler chain (penalties, top-k, top-p, temperature, seeded distribution, or greedy), so
sampling stays per request while the weights are read once per step for all of them.

An answer does not depend on its neighbours. llama.cpp's CPU flash attention sums a query
over the KV cells tile by tile (64 cells, in cell order) in a pass of FA_TILE_ROWS query rows
or more, and row by row (queries rounded to float16) in a shorter pass; the two differ by up
to 0.8 in a logit, and in a KV buffer shared by all sequences a request's cells land wherever
the others left room, which changes the tiles. So each slot has its own stream, where a
request's cells sit exactly where they would if it ran alone, and every token is computed in
the kind of pass it would get alone: prompts in passes of their own (`n_batch` tokens, the
last one shorter), answer tokens one per request in the shared step. Greedy answers, and
sampled ones with a seed, are then the same alone, in a batch, and with a reused prefix
(tested); a shared buffer changed 2 of 4 greedy answers of 24 tokens in a batch of 4 here.

Prefix caching. A prompt's KV cache at position i depends only on tokens 0..i, so a request
whose prompt starts like another's need not compute that part again. A slot keeps the
prompt of the request it last ran (not its answer) until it is needed again; a new request
takes the free slot holding the longest usable prefix of its prompt and reads only the rest.
When another slot holds more of it, finished or still running, its stream is copied
(`llama_memory_seq_cp` between streams copies the whole buffer, then the copy is cut back to
the prefix), and a request still reading the common prefix is waited for, so a burst of
requests with the same system prompt reads it once. The newcomer always reads its last
prompt token itself (for the logits), and a prefix is cut where the source computed a token
in another kind of pass than the newcomer would alone (see `_usable`).
"""

from __future__ import annotations

import codecs
import ctypes
import itertools
import logging
import os
import random
from dataclasses import dataclass
from typing import Any, ClassVar

from services.generator import metrics
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
# A newcomer waits for a running request to read a common prefix only when that saves it at
# least this many prompt tokens; a shorter one it reads itself at once.
WAIT_MIN_TOKENS = 32
# From this many query rows in one pass, llama.cpp's CPU flash attention switches to its
# tiled kernel: GGML_FA_TILE_Q in ggml-cpu/common.h (measured here: a prompt's last token
# computed in a pass of 63 rows or fewer gets other logits than in a pass of 64 or more).
FA_TILE_ROWS = 64


def common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many tokens `a` and `b` share from the start."""
    # commonprefix compares any two sequences element by element, token ids included.
    return len(os.path.commonprefix([a, b]))  # noqa: RUF071


@dataclass(eq=False)
class _Slot:
    """A KV cache stream, the sequence id that names it, and what it holds."""

    seq_id: int
    seq: Sequence | None = None  # the request running in it
    held: tuple[int, ...] = ()  # idle: the prompt whose cells it kept, for reuse
    used: int = 0  # when it last ran a request or gave a prefix (least recently used first)


@dataclass
class _SeqState:
    slot: _Slot
    sampler: Any  # llama_sampler_p
    position: int = 0  # tokens of this sequence in the KV cache
    last: int = -1  # sampled, not yet in the KV cache
    decoder: codecs.IncrementalDecoder | None = None
    # A running request reading the prefix this one will copy from it, and its length.
    wait_for: tuple[Sequence, int] | None = None

    @property
    def seq_id(self) -> int:
        return self.slot.seq_id


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
        # A stream of context_length cells per slot: any admitted request fits in its own.
        self.kv_tokens = self.context_length * self.max_batch
        # One decode call holds a prompt chunk, or a token of every running request.
        self.n_batch = max(settings.prefill_chunk, self.max_batch)
        self.threads = cpu_threads(settings.threads)
        self.prefix_cache = settings.prefix_cache
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = self.kv_tokens
        params.n_batch = self.n_batch
        params.n_ubatch = self.n_batch
        params.n_seq_max = self.max_batch
        params.kv_unified = False  # a stream per sequence: see the module docstring
        params.n_threads = self.threads
        params.n_threads_batch = self.threads
        params.no_perf = True
        self.ctx = _internals.LlamaContext(model=self.model, params=params, verbose=False)
        if llama_cpp.llama_n_ctx_seq(self.ctx.ctx) < self.context_length:
            raise FailedPrecondition(
                f"llama.cpp gave each of {self.max_batch} sequences "
                f"{llama_cpp.llama_n_ctx_seq(self.ctx.ctx)} KV cells, fewer than "
                f"RAGRAIL_GENERATOR_CONTEXT_LENGTH={self.context_length}"
            )
        self.memory = llama_cpp.llama_get_memory(self.ctx.ctx)
        self.batch = _internals.LlamaBatch(n_tokens=self.n_batch, embd=0, n_seq_max=1)
        self.slots = [_Slot(seq_id) for seq_id in range(self.max_batch)]
        self._tick = itertools.count(1)
        self.reused_tokens = 0  # prompt tokens taken from cells another request computed
        self.read_tokens = 0  # prompt tokens computed
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

    @property
    def held_tokens(self) -> int:
        """Prompt tokens idle slots keep for reuse."""
        return sum(len(slot.held) for slot in self.slots if slot.seq is None)

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
        prompt = seq.prompt_ids
        free = [slot for slot in self.slots if slot.seq is None]
        # The free slot holding most of this prompt, else the one least recently used.
        slot = max(free, key=lambda s: (self._usable(s.held, prompt, len(s.held)), -s.used))
        slot.seq = seq
        state = _SeqState(slot, self._sampler(seq))
        state.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        if seq.request.sampling.repetition_penalty != 1.0:
            for token in prompt[-PENALTY_LAST_N:]:
                self.lib.llama_sampler_accept(state.sampler, token)
        seq.state = state
        self._attach_prefix(seq)

    def _big_end(self, n_prompt: int) -> int:
        """How many leading tokens of an `n_prompt`-token prompt a request alone reads in
        passes of FA_TILE_ROWS or more (its passes are `n_batch` long, the last one shorter);
        the rest, a last pass shorter than that, it reads in a short pass."""
        if self.n_batch < FA_TILE_ROWS:
            return 0
        last = n_prompt % self.n_batch or self.n_batch
        return n_prompt if last >= FA_TILE_ROWS else n_prompt - last

    def _usable(self, source: tuple[int, ...], prompt: tuple[int, ...], ready: int) -> int:
        """How much of `prompt` may come from the cells of `source`'s prompt, of which the
        first `ready` tokens are in the KV cache: their common prefix, short of the last
        prompt token (read for its logits), within which each token was computed in the same
        kind of pass as a lone `prompt` would compute it, and leaving none or at least
        FA_TILE_ROWS tokens to read in long passes."""
        if not self.prefix_cache or not source:
            return 0
        length = min(common_prefix(source, prompt), len(prompt) - 1, ready)
        source_big, big = self._big_end(len(source)), self._big_end(len(prompt))
        if source_big != big:
            length = min(length, source_big, big)
        if 0 < big - length < FA_TILE_ROWS:
            length = big - FA_TILE_ROWS
        return max(length, 0)

    def _attach_prefix(self, seq: Sequence) -> None:
        """Gives `seq` the longest usable prefix of its prompt that a slot holds: its own,
        another idle one's, or a running request's that has read it; or later (`wait_for`)
        a running request's still reading it, when that saves WAIT_MIN_TOKENS more."""
        state: _SeqState = seq.state
        prompt = seq.prompt_ids
        own = state.slot
        source, have = own, self._usable(own.held, prompt, len(own.held))
        waiting: tuple[Sequence, int] | None = None
        for slot in self.slots:
            other = slot.seq
            if slot is own:
                continue
            if other is None:
                ready = self._usable(slot.held, prompt, len(slot.held))
            elif other.state.wait_for is not None:
                continue  # never wait on a waiting request: two could wait on each other
            else:
                ready = self._usable(other.prompt_ids, prompt, other.prefilled)
                later = self._usable(other.prompt_ids, prompt, len(other.prompt_ids))
                if later > ready and (waiting is None or later > waiting[1]):
                    waiting = (other, later)
            if ready > have:
                source, have = slot, ready
        own.held = ()  # running now: its cells are no longer a prefix for others
        if waiting is not None and waiting[1] - have >= WAIT_MIN_TOKENS:
            state.wait_for = waiting
            return
        self._take(seq, source, have)

    def _take(self, seq: Sequence, source: _Slot, length: int) -> None:
        """Makes the first `length` prompt tokens of `seq` the cells `source` computed (a
        request that has read nothing yet), and frees the rest of its slot."""
        own = seq.state.slot
        if source is not own and length:
            self.lib.llama_memory_seq_cp(self.memory, source.seq_id, own.seq_id, -1, -1)
            source.used = next(self._tick)
        self.lib.llama_memory_seq_rm(self.memory, own.seq_id, length if length else -1, -1)
        if length:
            metrics.PREFIX_CACHE_TOKENS.labels("llamacpp").inc(length)
            self.reused_tokens += length
        seq.prefilled = seq.state.position = length

    def _resolve_waits(self, seqs: list[Sequence]) -> None:
        for seq in seqs:
            state: _SeqState = seq.state
            if state.wait_for is None:
                continue
            source, length = state.wait_for
            if source.state is None:  # it ended first; its slot may still hold the prompt
                state.wait_for = None
                self._attach_prefix(seq)
            elif source.prefilled >= length:
                state.wait_for = None
                self._take(seq, source.state.slot, length)

    def remove(self, seq: Sequence) -> None:
        state: _SeqState | None = seq.state
        if state is None:
            return
        slot = state.slot
        if self.prefix_cache and seq.prefilled == len(seq.prompt_ids) and state.wait_for is None:
            # Keep the prompt's cells for the next request that starts the same way.
            self.lib.llama_memory_seq_rm(self.memory, slot.seq_id, len(seq.prompt_ids), -1)
            slot.held = seq.prompt_ids
        else:
            self.lib.llama_memory_seq_rm(self.memory, slot.seq_id, -1, -1)
            slot.held = ()
        slot.used = next(self._tick)
        slot.seq = None
        self.lib.llama_sampler_free(state.sampler)
        seq.state = None

    def step(self, seqs: list[Sequence]) -> list[int | None]:
        """Prompts first, each request's in passes of its own, as it would read them alone
        (long passes of up to n_batch tokens, all of a step's prompt reading together at most
        n_batch; a last pass shorter than FA_TILE_ROWS as a short pass); then one pass with
        the next token of every request that is answering. Tokens are sampled after the pass
        that made their logits."""
        self._resolve_waits(seqs)
        out: list[int | None] = [None] * len(seqs)
        budget = self.n_batch
        for i, seq in enumerate(seqs):
            state: _SeqState = seq.state
            left = len(seq.prompt_ids) - seq.prefilled
            if not left or state.wait_for is not None:
                continue
            big = self._big_end(len(seq.prompt_ids)) - seq.prefilled
            if big > 0:
                take = min(big, budget)
                if 0 < big - take < FA_TILE_ROWS <= big - FA_TILE_ROWS:
                    take = big - FA_TILE_ROWS  # what is left must make a long pass too
                if take < FA_TILE_ROWS and take < big:
                    if budget < self.n_batch:
                        continue  # no room for a long pass in this step
                    # Only with PREFILL_CHUNK under 2 x FA_TILE_ROWS: no split of the rest
                    # leaves two long passes, so it is read as it fits (not bit-exact).
                    take = min(big, budget)
            else:
                # The short last pass (with PREFILL_CHUNK under FA_TILE_ROWS, every pass).
                take = min(left, FA_TILE_ROWS - 1, self.n_batch)
                if take > budget and budget < self.n_batch:
                    continue
            budget -= take
            self._run([(i, seq, take)], out)
        answering = [
            (i, seq, 0)
            for i, seq in enumerate(seqs)
            if out[i] is None and seq.state.wait_for is None
            and seq.prefilled == len(seq.prompt_ids)
        ]  # fmt: skip
        if answering:
            self._run(answering, out)
        return out

    def _run(self, items: list[tuple[int, Sequence, int]], out: list[int | None]) -> None:
        """One llama_decode: for each (index, request, k), the next k prompt tokens of the
        request (k=0: its last sampled token); samples where a request's prompt is done."""
        raw = self.batch.batch
        n = 0
        sample_at: list[tuple[int, Sequence, int]] = []

        def put(token: int, state: _SeqState, logits: bool) -> None:
            nonlocal n
            raw.token[n] = token
            raw.pos[n] = state.position
            raw.n_seq_id[n] = 1
            raw.seq_id[n][0] = state.seq_id
            raw.logits[n] = logits
            state.position += 1
            n += 1

        for i, seq, take in items:
            state: _SeqState = seq.state
            if take == 0:
                sample_at.append((i, seq, n))
                put(state.last, state, True)
                continue
            start = seq.prefilled
            for token in seq.prompt_ids[start : start + take - 1]:
                put(token, state, False)
            seq.prefilled += take
            self.read_tokens += take
            done = seq.prefilled == len(seq.prompt_ids)
            if done:
                sample_at.append((i, seq, n))
            put(seq.prompt_ids[start + take - 1], state, done)
        raw.n_tokens = n
        code = self.lib.llama_decode(self.ctx.ctx, raw)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code} for a batch of {n} tokens")
        for i, seq, index in sample_at:
            token = self.lib.llama_sampler_sample(seq.state.sampler, self.ctx.ctx, index)
            seq.state.last = token
            out[i] = token

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
                "prefix_cache": "on" if self.model.prefix_cache else "off",
                "prefix_held_tokens": str(self.model.held_tokens),
                "prefix_reused_tokens": str(self.model.reused_tokens),
            },
        )

    def render_chat(self, messages: list[Message]) -> str:
        return gguf_render(self.formatter, messages)

    def tokenize(self, text: str, *, chat: bool) -> list[int]:
        return gguf_encode(self.model.model, text, chat)

    async def close(self) -> None:
        await super().close()
        self.model.close()
