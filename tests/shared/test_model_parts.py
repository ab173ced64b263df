"""ModelServicer.run_in_parts: a large request as several model calls, rows in input order,
and no call after its caller has gone."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from services.reranker.settings import RerankerSettings
from shared.models.service import ModelServicer

TEXTS = [f"text {'x' * (i * 7 % 50)} {i}" for i in range(100)]


def lengths(texts: list[str]) -> np.ndarray:
    return np.array([[len(t), int(t.rsplit(" ", 1)[1])] for t in texts], dtype=np.int64)


async def test_parts_come_back_in_input_order() -> None:
    servicer: ModelServicer = ModelServicer(None, RerankerSettings())
    calls: list[int] = []

    def model(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return lengths(texts)

    out = await servicer.run_in_parts(model, TEXTS, 16)
    assert out.tolist() == lengths(TEXTS).tolist()
    assert sum(calls) == len(TEXTS) and max(calls) == 16 and len(calls) == 7
    one = await servicer.run_in_parts(model, TEXTS[:5], 16)
    assert one.tolist() == lengths(TEXTS[:5]).tolist() and calls[-1] == 5


async def test_a_cancelled_request_makes_no_further_calls() -> None:
    servicer: ModelServicer = ModelServicer(None, RerankerSettings())
    started = threading.Event()
    release = threading.Event()
    calls = 0

    def model(texts: list[str]) -> np.ndarray:
        nonlocal calls
        calls += 1
        started.set()
        release.wait(5)
        return lengths(texts)

    task = asyncio.ensure_future(servicer.run_in_parts(model, TEXTS, 10))
    await asyncio.to_thread(started.wait, 5)
    task.cancel()  # what grpc.aio does to a handler whose caller has gone
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)
    assert calls == 1
