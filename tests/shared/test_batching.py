import asyncio

import pytest

from shared.batching import MicroBatcher


async def test_concurrent_requests_share_calls_and_get_their_own_results() -> None:
    calls: list[list[int]] = []

    async def run(items: list[int]) -> list[int]:
        calls.append(list(items))
        return [i * 10 for i in items]

    batcher: MicroBatcher[int, int] = MicroBatcher(run, max_items=8, wait_s=0.05)
    results = await asyncio.gather(*(batcher.submit([i, i + 100]) for i in range(6)))
    await batcher.close()
    assert results == [[i * 10, (i + 100) * 10] for i in range(6)]
    assert len(calls) < 6  # coalesced
    assert all(len(c) <= 8 for c in calls)


async def test_errors_reach_every_caller_of_the_batch() -> None:
    async def run(items: list[int]) -> list[int]:
        raise ValueError("model failed")

    batcher: MicroBatcher[int, int] = MicroBatcher(run, max_items=8, wait_s=0.01)
    outcomes = await asyncio.gather(
        batcher.submit([1]), batcher.submit([2]), return_exceptions=True
    )
    await batcher.close()
    assert all(isinstance(o, ValueError) for o in outcomes)


async def test_cancelled_caller_does_not_break_the_others() -> None:
    async def run(items: list[int]) -> list[int]:
        await asyncio.sleep(0.05)
        return items

    batcher: MicroBatcher[int, int] = MicroBatcher(run, max_items=8, wait_s=0.01)
    doomed = asyncio.create_task(batcher.submit([1]))
    kept = asyncio.create_task(batcher.submit([2]))
    await asyncio.sleep(0)
    doomed.cancel()
    assert await kept == [2]
    with pytest.raises(asyncio.CancelledError):
        await doomed
    await batcher.close()
