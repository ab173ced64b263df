"""One generator call over a fresh gRPC channel, unary or streamed, for the engine tests that
talk to a running generator service (test_openai_engine.py, test_triton_engine.py)."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import grpc

from shared.proto.ragrail.v1 import generator_pb2, generator_pb2_grpc
from tests.grpc_calls import unary

call = functools.partial(unary, generator_pb2_grpc.GeneratorStub)


def stream(target: str, message: Any, timeout: float = 60) -> list[generator_pb2.GenerateChunk]:
    async def go() -> list[generator_pb2.GenerateChunk]:
        async with grpc.aio.insecure_channel(target) as channel:
            stub = generator_pb2_grpc.GeneratorStub(channel)
            return [c async for c in stub.GenerateStream(message, timeout=timeout)]

    return asyncio.run(go())
