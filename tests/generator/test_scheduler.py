"""The continuous-batching scheduler, driven by a scripted model: requests share steps, join
mid-answer, leave when cancelled, wait for slots and KV room, and overflow the queue."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import ClassVar

import pytest

from services.generator.backends.base import (
    Chunk,
    EngineInfo,
    FinishReason,
    GenerationRequest,
    Message,
    Sampling,
)
from services.generator.scheduler import (
    BatchModel,
    LocalEngine,
    Scheduler,
    SchedulerLimits,
    Sequence,
)
from shared.errors import DeadlineExceeded, RagrailError, ResourceExhausted

END = 0


class ScriptedModel(BatchModel):
    """Reads a prompt in one step, then answers token 1, 2, 3, ... and ends after the number
    of tokens the prompt's first id says (0: never ends on its own)."""

    def __init__(self, step_s: float = 0.01) -> None:
        self.step_s = step_s
        self.batches: list[int] = []
        self.live: set[int] = set()
        self.removed: list[str] = []
        self.gate = threading.Event()
        self.gate.set()

    def add(self, seq: Sequence) -> None:
        if seq.request.request_id == "unloadable":
            raise ValueError("no sampler for this one")
        seq.state = 0
        self.live.add(id(seq))

    def remove(self, seq: Sequence) -> None:
        self.live.discard(id(seq))
        self.removed.append(seq.request.request_id)

    def step(self, seqs: list[Sequence]) -> list[int | None]:
        self.gate.wait()
        time.sleep(self.step_s)
        assert all(id(s) in self.live for s in seqs)
        self.batches.append(len(seqs))
        out: list[int | None] = []
        for seq in seqs:
            seq.prefilled = len(seq.prompt_ids)
            seq.state += 1
            length = seq.prompt_ids[0]
            out.append(END if length and seq.state > length else seq.state)
        return out

    def is_end(self, token: int) -> bool:
        return token == END

    def detokenize(self, seq: Sequence, token: int) -> str:
        return f"{token} "


class ScriptedEngine(LocalEngine):
    name: ClassVar[str] = "scripted"

    def __init__(self, model: ScriptedModel, **limits: int) -> None:
        values = {"max_batch_size": 4, "queue_size": 2, "kv_cache_tokens": 1000}
        values.update(limits)
        self.scheduler = Scheduler(model, SchedulerLimits(context_length=1000, **values), self.name)

    def info(self) -> EngineInfo:
        return EngineInfo(self.name, "scripted", 1000)

    def render_chat(self, messages: list[Message]) -> str:
        return ""

    def tokenize(self, text: str, *, chat: bool) -> list[int]:
        return []


def job(name: str, answer: int, max_tokens: int = 100, deadline: float | None = None):  # type: ignore[no-untyped-def]
    return GenerationRequest(
        name, "", (answer, 7, 7), Sampling(max_tokens=max_tokens), deadline=deadline
    )


async def collect(engine: LocalEngine, request: GenerationRequest) -> list[Chunk]:
    return [chunk async for chunk in engine.generate(request)]


@contextlib.asynccontextmanager
async def running(engine: LocalEngine):  # type: ignore[no-untyped-def]
    await engine.start()
    try:
        yield engine
    finally:
        await engine.close()


async def test_concurrent_requests_share_steps_and_end_on_their_own() -> None:
    model = ScriptedModel()
    async with running(ScriptedEngine(model)) as engine:
        short, long_, capped = await asyncio.gather(
            collect(engine, job("short", 2)),
            collect(engine, job("long", 6)),
            collect(engine, job("capped", 0, max_tokens=4)),
        )
    assert "".join(c.text for c in short) == "1 2 "
    assert short[-1].finish_reason is FinishReason.STOP and short[-1].tokens == 0
    assert sum(c.tokens for c in long_) == 6
    assert [c.finish_reason for c in capped][-1] is FinishReason.LENGTH
    assert sum(c.tokens for c in capped) == 4
    assert max(model.batches) == 3, model.batches  # one forward pass advanced all three
    assert not model.live, "every request's state was freed"


async def test_a_request_joins_a_running_batch_without_waiting_for_it() -> None:
    model = ScriptedModel(step_s=0.02)
    async with running(ScriptedEngine(model)) as engine:
        first = asyncio.create_task(collect(engine, job("first", 30)))
        await asyncio.sleep(0.1)
        started = time.monotonic()
        second = await collect(engine, job("second", 2))
        assert time.monotonic() - started < 0.3  # not behind the 30 steps of the first
        assert not first.done()
        await first
    assert sum(c.tokens for c in second) == 2


async def test_full_queue_is_resource_exhausted_and_says_which_limit() -> None:
    model = ScriptedModel()
    model.gate.clear()  # hold every step so requests pile up
    async with running(ScriptedEngine(model, max_batch_size=1, queue_size=1)) as engine:
        first = engine.generate(job("a", 0))
        pending = asyncio.ensure_future(first.__anext__())
        await asyncio.sleep(0.05)  # admitted: running, its step blocked
        second = engine.generate(job("b", 0))
        queued = asyncio.ensure_future(second.__anext__())
        await asyncio.sleep(0.05)
        with pytest.raises(ResourceExhausted, match="RAGRAIL_GENERATOR_QUEUE_SIZE=1"):
            await engine.generate(job("c", 0)).__anext__()
        model.gate.set()
        assert (await pending).text == "1 "
        await first.aclose()  # the caller goes away: its slot goes to the queued request
        assert (await queued).text == "1 "
        await second.aclose()
    assert model.removed[:2] == ["a", "b"]


async def test_cancelled_request_leaves_the_batch() -> None:
    model = ScriptedModel()
    async with running(ScriptedEngine(model)) as engine:
        stream = engine.generate(job("gone", 0))
        await stream.__anext__()
        await stream.aclose()
        for _ in range(100):
            if "gone" in model.removed:
                break
            await asyncio.sleep(0.01)
        assert "gone" in model.removed
        assert engine.scheduler.load() == (0, 0)


async def test_kv_room_holds_a_request_back_until_another_finishes() -> None:
    model = ScriptedModel()
    # Each request reserves 3 prompt + 10 answer tokens; room for one at a time.
    async with running(ScriptedEngine(model, kv_cache_tokens=20)) as engine:
        results = await asyncio.gather(
            collect(engine, job("x", 0, max_tokens=10)),
            collect(engine, job("y", 0, max_tokens=10)),
        )
    assert max(model.batches) == 1
    assert [sum(c.tokens for c in r) for r in results] == [10, 10]


async def test_deadline_passed_in_the_queue_is_deadline_exceeded() -> None:
    model = ScriptedModel()
    async with running(ScriptedEngine(model, max_batch_size=1)) as engine:
        blocker = engine.generate(job("blocker", 0))
        await blocker.__anext__()
        with pytest.raises(DeadlineExceeded):
            await collect(engine, job("late", 2, deadline=time.monotonic() + 0.05))
        await blocker.aclose()


async def test_close_ends_pending_requests_as_cancelled() -> None:
    model = ScriptedModel()
    engine = ScriptedEngine(model)
    await engine.start()
    stream = engine.generate(job("open", 0))
    await stream.__anext__()
    await engine.close()
    rest = [chunk async for chunk in stream]
    assert rest and rest[-1].finish_reason is FinishReason.CANCELLED


async def test_a_request_that_cannot_start_fails_alone() -> None:
    model = ScriptedModel()
    async with running(ScriptedEngine(model)) as engine:
        with pytest.raises(RagrailError, match="could not start this request"):
            await collect(engine, job("unloadable", 2))
        assert sum(c.tokens for c in await collect(engine, job("fine", 2))) == 2
        assert engine.scheduler.load() == (0, 0)
