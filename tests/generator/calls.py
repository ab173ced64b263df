"""One generator call over a fresh gRPC channel, unary or streamed, for the engine tests that
talk to a running generator service (test_openai_engine.py, test_triton_engine.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from shared.proto.ragrail.v1 import generator_pb2, generator_pb2_grpc


def call(target: str, method: str, message: Any, timeout: float = 60) -> Any:
    async def go() -> Any:
        async with grpc.aio.insecure_channel(target) as channel:
            stub = generator_pb2_grpc.GeneratorStub(channel)
            return await getattr(stub, method)(message, timeout=timeout)

    return asyncio.run(go())


def stream(target: str, message: Any, timeout: float = 60) -> list[generator_pb2.GenerateChunk]:
    async def go() -> list[generator_pb2.GenerateChunk]:
        async with grpc.aio.insecure_channel(target) as channel:
            stub = generator_pb2_grpc.GeneratorStub(channel)
            return [c async for c in stub.GenerateStream(message, timeout=timeout)]

    return asyncio.run(go())
