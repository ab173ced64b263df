"""One generator call over a fresh gRPC channel, unary or streamed, or the error a unary call
fails with, for the engine tests that talk to a running generator service
(test_openai_engine.py, test_triton_engine.py)."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import grpc
import pytest

from shared.proto.ragrail.v1 import generator_pb2, generator_pb2_grpc
from tests.grpc_calls import unary

call = functools.partial(unary, generator_pb2_grpc.GeneratorStub)


def stream(target: str, message: Any, timeout: float = 60) -> list[generator_pb2.GenerateChunk]:
    async def go() -> list[generator_pb2.GenerateChunk]:
        async with grpc.aio.insecure_channel(target) as channel:
            stub = generator_pb2_grpc.GeneratorStub(channel)
            return [c async for c in stub.GenerateStream(message, timeout=timeout)]

    return asyncio.run(go())


def rpc_error(target: str, method: str, message: Any, timeout: float = 60) -> grpc.aio.AioRpcError:
    """The error that `method` at `target` fails with (the test fails if it answers)."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        call(target, method, message, timeout)
    return caught.value
