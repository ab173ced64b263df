"""Calls a test makes to a ragrail gRPC server it started, each over a fresh channel: one
unary call of any service, and what the server says about itself (health and reflection)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc


def unary(stub: Any, target: str, method: str, request: Any, timeout: float = 60) -> Any:
    """`method` of the service whose *_pb2_grpc stub class is `stub`, at `target`."""

    async def go() -> Any:
        async with grpc.aio.insecure_channel(target) as channel:
            return await getattr(stub(channel), method)(request, timeout=timeout)

    return asyncio.run(go())


def health_and_services(target: str, service: str) -> tuple[int, list[str]]:
    """(the health status of `service`, e.g. "ragrail.v1.Embedder"; the names reflection lists)."""

    async def go() -> tuple[int, list[str]]:
        async with grpc.aio.insecure_channel(target) as channel:
            health = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=5
            )
            stream = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
            )
            names = [s.name async for r in stream for s in r.list_services_response.service]
            return health.status, names

    return asyncio.run(go())
