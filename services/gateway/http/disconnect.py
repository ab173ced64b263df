"""Work that stops when its client leaves.

A streamed answer notices a departed client itself (Starlette cancels the stream), but a
plain request handler does not: a non-streamed chat went on generating for 13 s after its
client had gone, and an abandoned ingest kept embedding and committed. `cancel_on_disconnect`
runs the work as a task beside a watcher of the connection; when the client leaves first it
cancels the task, and with it the gRPC call in flight (grpc.aio cancels the RPC, and the
service's handler is cancelled in turn). The answer is then a 499 nobody reads, for the log
and the failure counter.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from services.gateway.http.errors import error_response

T = TypeVar("T")
CLIENT_CLOSED_REQUEST = 499  # nginx's status for it; no standard one exists


class ClientDisconnected(Exception):
    """The client closed the connection before the answer was ready."""


async def _until_disconnected(request: Request) -> None:
    # The body has been read by now, so the next message is the disconnect: uvicorn holds
    # `receive` until the client goes or the response is complete.
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def cancel_on_disconnect(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """The result of `work`, or ClientDisconnected once `work` has been cancelled because the
    client left. Call it only after the request body has been read."""
    task: asyncio.Task[T] = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_until_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task  # the gRPC calls in it are cancelled by the time this returns
    raise ClientDisconnected


def install_disconnect_handler(app: FastAPI) -> None:
    @app.exception_handler(ClientDisconnected)
    async def client_left(request: Request, exc: ClientDisconnected) -> JSONResponse:
        return error_response(
            CLIENT_CLOSED_REQUEST,
            "the client closed the connection; the work was cancelled",
            "ClientDisconnected",
        )
