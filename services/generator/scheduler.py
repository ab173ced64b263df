"""Continuous batching for the engines that run their model in this process.

The model side of the local engines (llamacpp, torch) implements `BatchModel`; this module is
the rest, the same for both. One scheduler thread owns the model. Each iteration it admits
waiting requests while there is a free batch slot and KV cache room for their prompt plus
max_tokens, drops requests whose caller went away or whose deadline passed, and calls
`BatchModel.step` once: a single forward pass that advances every running request by one
token (or by a chunk of its prompt). A request that arrives mid-answer joins the next step
instead of waiting for the others to finish, and one that finishes frees its slot for the
next in line at once.

Tokens go back to the event loop in one `call_soon_threadsafe` per step. The model calls
release the GIL (ctypes for llama.cpp, ATen for PyTorch), so the gRPC side keeps serving
while a step runs.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from services.generator import metrics
from services.generator.backends.base import Chunk, Engine, FinishReason, GenerationRequest
from services.generator.settings import GeneratorSettings
from shared.errors import DeadlineExceeded, RagrailError, ResourceExhausted

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Sequence:
    """One request inside the scheduler. `state` belongs to the BatchModel."""

    request: GenerationRequest
    queue: asyncio.Queue[Chunk | BaseException]
    generated: int = 0
    prefilled: int = 0  # prompt tokens already in the KV cache
    state: Any = None
    cancelled: bool = False
    finished: bool = False
    submitted: float = field(default_factory=time.monotonic)

    @property
    def prompt_ids(self) -> tuple[int, ...]:
        return self.request.prompt_ids

    @property
    def reserved(self) -> int:
        """KV cache tokens this request may need: its prompt and its longest answer."""
        return len(self.request.prompt_ids) + self.request.sampling.max_tokens


class BatchModel(ABC):
    """The model side of a local engine. Only the scheduler thread calls these."""

    @abstractmethod
    def add(self, seq: Sequence) -> None:
        """Sets up per-request state (sampler, KV cache row) for a request about to run."""

    @abstractmethod
    def step(self, seqs: list[Sequence]) -> list[int | None]:
        """One forward pass over `seqs`: requests still reading their prompt advance by up to
        a prefill chunk (updating `seq.prefilled`), the others by one token. Returns, per
        request, the token it sampled, or None while its prompt is not fully read."""

    @abstractmethod
    def remove(self, seq: Sequence) -> None:
        """Frees what `add` and `step` hold for a request that finished or was dropped."""

    @abstractmethod
    def is_end(self, token: int) -> bool:
        """True for the model's end-of-generation tokens."""

    @abstractmethod
    def detokenize(self, seq: Sequence, token: int) -> str:
        """The text `token` adds to the request's answer; "" while it is an incomplete
        character (the rest comes with later tokens)."""

    def flush(self, seq: Sequence) -> str:
        """Text still held back by `detokenize` when the answer ends."""
        return ""


@dataclass
class SchedulerLimits:
    max_batch_size: int
    queue_size: int
    kv_cache_tokens: int
    context_length: int


@dataclass
class _State:
    waiting: collections.deque[Sequence] = field(default_factory=collections.deque)
    running: list[Sequence] = field(default_factory=list)
    kv_reserved: int = 0
    closing: bool = False


class Scheduler:
    def __init__(self, model: BatchModel, limits: SchedulerLimits, engine: str) -> None:
        self.model = model
        self.limits = limits
        self.engine = engine
        self._state = _State()
        self._cond = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, name=f"{engine}-scheduler", daemon=True)

    # -- event loop side ------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread.start()

    def submit(self, seq: Sequence) -> None:
        limits = self.limits
        with self._cond:
            state = self._state
            if state.closing:
                raise RagrailError("the generator is shutting down; retry on another replica")
            free_slots = max(limits.max_batch_size - len(state.running), 0)
            if len(state.waiting) >= limits.queue_size + free_slots:
                metrics.REJECTED.labels(self.engine).inc()
                raise ResourceExhausted(
                    f"the generator is at capacity: {len(state.running)} requests generating "
                    f"and {len(state.waiting)} waiting (RAGRAIL_GENERATOR_MAX_BATCH_SIZE="
                    f"{limits.max_batch_size}, RAGRAIL_GENERATOR_QUEUE_SIZE={limits.queue_size}); "
                    "retry after a short wait"
                )
            state.waiting.append(seq)
            metrics.WAITING.labels(self.engine).set(len(state.waiting))
            self._cond.notify()

    def cancel(self, seq: Sequence) -> None:
        """The caller is gone: the scheduler drops the request before its next step."""
        if seq.finished:
            return
        with self._cond:
            seq.cancelled = True
            self._cond.notify()

    def load(self) -> tuple[int, int]:
        """(requests generating, requests waiting)."""
        with self._cond:
            return len(self._state.running), len(self._state.waiting)

    def close(self) -> None:
        """Stops the thread; requests still queued or running end with CANCELLED."""
        with self._cond:
            self._state.closing = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    # -- scheduler thread -----------------------------------------------------------------

    def _deliver(self, items: list[tuple[Sequence, Chunk | BaseException]]) -> None:
        if not items or self._loop is None or self._loop.is_closed():
            return

        def put() -> None:
            for seq, item in items:
                seq.queue.put_nowait(item)

        self._loop.call_soon_threadsafe(put)

    def _admit(self, out: list[tuple[Sequence, Chunk | BaseException]]) -> bool:
        """Moves waiting requests to running while they fit; False when closing."""
        limits, state = self.limits, self._state
        with self._cond:
            while not state.closing and not state.waiting and not state.running:
                self._cond.wait()
            if state.closing:
                return False
            now = time.monotonic()
            while state.waiting:
                seq = state.waiting[0]
                if seq.cancelled:
                    state.waiting.popleft()
                    continue
                if seq.request.deadline is not None and now >= seq.request.deadline:
                    state.waiting.popleft()
                    out.append((seq, DeadlineExceeded("the deadline passed while queued")))
                    continue
                if len(state.running) >= limits.max_batch_size or (
                    state.kv_reserved + seq.reserved > limits.kv_cache_tokens
                ):
                    break  # first come, first served: nobody overtakes the head of the queue
                state.waiting.popleft()
                try:
                    self.model.add(seq)
                except Exception:
                    log.exception("setting up a request failed", extra={"engine": self.engine})
                    out.append((seq, RagrailError(f"the {self.engine} engine could not start "
                                                  "this request; see its log")))  # fmt: skip
                    continue
                state.kv_reserved += seq.reserved
                state.running.append(seq)
                metrics.QUEUE_WAIT.labels(self.engine).observe(now - seq.submitted)
            metrics.WAITING.labels(self.engine).set(len(state.waiting))
            metrics.RUNNING.labels(self.engine).set(len(state.running))
        return True

    def _finish(self, seq: Sequence) -> None:
        seq.finished = True
        try:
            self.model.remove(seq)
        except Exception:
            log.exception("freeing a finished request failed", extra={"engine": self.engine})
        with self._cond:
            self._state.running.remove(seq)
            self._state.kv_reserved -= seq.reserved
            metrics.RUNNING.labels(self.engine).set(len(self._state.running))

    def _run(self) -> None:
        try:
            while True:
                out: list[tuple[Sequence, Chunk | BaseException]] = []
                if not self._admit(out):
                    break
                self._deliver(out)
                self._iterate()
        finally:
            self._drain()

    def _iterate(self) -> None:
        out: list[tuple[Sequence, Chunk | BaseException]] = []
        now = time.monotonic()
        for seq in list(self._state.running):
            if seq.cancelled:
                metrics.CANCELLED.labels(self.engine).inc()
                self._finish(seq)
            elif seq.request.deadline is not None and now >= seq.request.deadline:
                out.append((seq, DeadlineExceeded("the deadline passed while generating")))
                self._finish(seq)
        batch = list(self._state.running)
        if not batch:
            self._deliver(out)
            return
        started = time.perf_counter()
        try:
            tokens = self.model.step(batch)
        except Exception:
            log.exception("generation step failed", extra={"engine": self.engine})
            error = RagrailError(f"the {self.engine} engine failed while generating; see its log")
            for seq in batch:
                out.append((seq, error))
                self._finish(seq)
            self._deliver(out)
            return
        metrics.STEP_SECONDS.labels(self.engine).observe(time.perf_counter() - started)
        metrics.BATCH_SIZE.labels(self.engine).observe(len(batch))
        for seq, token in zip(batch, tokens, strict=True):
            if token is not None:
                out.append((seq, self._advance(seq, token)))
        for seq, item in out:
            if isinstance(item, Chunk) and item.finish_reason is not None and not seq.finished:
                self._finish(seq)
        self._deliver(out)

    def _advance(self, seq: Sequence, token: int) -> Chunk:
        sampling = seq.request.sampling
        if self.model.is_end(token):
            return Chunk(self.model.flush(seq), 0, FinishReason.STOP)
        seq.generated += 1
        text = self.model.detokenize(seq, token)
        total = len(seq.prompt_ids) + seq.generated
        if seq.generated >= sampling.max_tokens or total >= self.limits.context_length:
            return Chunk(text + self.model.flush(seq), 1, FinishReason.LENGTH)
        return Chunk(text, 1)

    def _drain(self) -> None:
        with self._cond:
            self._state.closing = True
            pending = list(self._state.waiting) + list(self._state.running)
            self._state.waiting.clear()
        for seq in list(self._state.running):
            self._finish(seq)
        self._deliver([(seq, Chunk("", 0, FinishReason.CANCELLED)) for seq in pending])


class LocalEngine(Engine):
    """An engine whose model runs in this process under a Scheduler (llamacpp, torch)."""

    scheduler: Scheduler

    def schedule(self, model: BatchModel, settings: GeneratorSettings, kv_cache_tokens: int,
                 context_length: int) -> None:  # fmt: skip
        """Puts `model` under a scheduler with the service's batch and queue limits."""
        limits = SchedulerLimits(
            max_batch_size=settings.max_batch_size,
            queue_size=settings.queue_size,
            kv_cache_tokens=kv_cache_tokens,
            context_length=context_length,
        )
        self.scheduler = Scheduler(model, limits, self.name)

    def scheduler_details(self) -> dict[str, str]:
        """The batch limits and the requests running and waiting now, for Info."""
        running, waiting = self.scheduler.load()
        return {
            "max_batch_size": str(self.scheduler.limits.max_batch_size),
            "kv_cache_tokens": str(self.scheduler.limits.kv_cache_tokens),
            "running": str(running),
            "waiting": str(waiting),
        }

    async def start(self) -> None:
        self.scheduler.start(asyncio.get_running_loop())

    async def close(self) -> None:
        await asyncio.to_thread(self.scheduler.close)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        seq = Sequence(request, asyncio.Queue())
        self.scheduler.submit(seq)
        try:
            while True:
                item = await seq.queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if item.finish_reason is not None:
                    return
        finally:
            self.scheduler.cancel(seq)
