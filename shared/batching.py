"""Coalesces small concurrent requests into one call of a batched function.

Model forward passes cost nearly the same for 1 or 16 short texts on a CPU, so ten users
searching at once should share one pass instead of queueing behind each other.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")


class MicroBatcher(Generic[In, Out]):
    """Calls `run(items)` with the items of every request queued within `wait_s`, up to
    `max_items` per call; each request gets back its own slice of the results in order."""

    def __init__(
        self,
        run: Callable[[list[In]], Awaitable[Sequence[Out]]],
        *,
        max_items: int,
        wait_s: float,
    ) -> None:
        self._run = run
        self._max_items = max_items
        self._wait_s = wait_s
        self._queue: asyncio.Queue[tuple[list[In], asyncio.Future[list[Out]]]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, items: list[In]) -> list[Out]:
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._loop())
        future: asyncio.Future[list[Out]] = asyncio.get_running_loop().create_future()
        await self._queue.put((items, future))
        return await future

    async def _loop(self) -> None:
        while True:
            batch = [await self._queue.get()]
            size = len(batch[0][0])
            deadline = asyncio.get_running_loop().time() + self._wait_s
            while size < self._max_items:
                timeout = deadline - asyncio.get_running_loop().time()
                try:
                    nxt = await asyncio.wait_for(self._queue.get(), max(timeout, 0))
                except TimeoutError:
                    break
                if size + len(nxt[0]) > self._max_items:
                    # Too big to join: run it on its own right after this batch.
                    await self._dispatch(batch)
                    batch, size = [nxt], len(nxt[0])
                    continue
                batch.append(nxt)
                size += len(nxt[0])
            await self._dispatch(batch)

    async def _dispatch(self, batch: list[tuple[list[In], asyncio.Future[list[Out]]]]) -> None:
        live = [(items, fut) for items, fut in batch if not fut.done()]  # skip cancelled callers
        if not live:
            return
        flat: list[Any] = [item for items, _ in live for item in items]
        try:
            results = await self._run(flat)
        except Exception as exc:
            for _, fut in live:
                if not fut.done():
                    fut.set_exception(exc)
            return
        start = 0
        for items, fut in live:
            if not fut.done():
                fut.set_result(list(results[start : start + len(items)]))
            start += len(items)

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
