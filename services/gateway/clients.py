"""The gateway's connections to the services, opened once at start-up."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from services.gateway.settings import GatewaySettings
from shared.clients import ServiceClient
from shared.proto.ragrail.v1 import (
    common_pb2,
    embedder_pb2,
    embedder_pb2_grpc,
    generator_pb2,
    generator_pb2_grpc,
    guardrails_pb2_grpc,
    reranker_pb2_grpc,
    retriever_pb2_grpc,
)


@dataclass
class EmbedderFacts:
    dimension: int
    max_length: int
    passage_prefix: str


class Services:
    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.embedder = ServiceClient(
            "embedder",
            settings.embedder_url,
            embedder_pb2_grpc.EmbedderStub,
            timeout_s=settings.request_timeout_s,
        )
        self.retriever = ServiceClient(
            "retriever",
            settings.retriever_url,
            retriever_pb2_grpc.RetrieverStub,
            timeout_s=settings.request_timeout_s,
        )
        # Optional stage: without a reranker, searches return first-stage results.
        self.reranker: ServiceClient | None = (
            ServiceClient(
                "reranker",
                settings.reranker_url,
                reranker_pb2_grpc.RerankerStub,
                timeout_s=settings.request_timeout_s,
                # Optional stage: when it is down, answer without it quickly.
                connect_timeout_s=0.5,
            )
            if settings.reranker_url
            else None
        )
        self.generator = ServiceClient(
            "generator",
            settings.generator_url,
            generator_pb2_grpc.GeneratorStub,
            timeout_s=settings.generation_timeout_s,
        )
        # Optional stage: without guardrails, chat goes straight through (and says so).
        self.guardrails: ServiceClient | None = (
            ServiceClient(
                "guardrails",
                settings.guardrails_url,
                guardrails_pb2_grpc.GuardrailsStub,
                timeout_s=settings.guardrails_timeout_s,
            )
            if settings.guardrails_url
            else None
        )
        self._embedder_facts: EmbedderFacts | None = None
        self._generator_info: generator_pb2.GeneratorInfo | None = None

    def all(self) -> dict[str, ServiceClient]:
        clients = {
            "embedder": self.embedder,
            "retriever": self.retriever,
            "generator": self.generator,
        }
        if self.reranker is not None:
            clients["reranker"] = self.reranker
        if self.guardrails is not None:
            clients["guardrails"] = self.guardrails
        return clients

    async def embedder_facts(self) -> EmbedderFacts:
        """Dimension and input length of the embedder; asked once, then cached."""
        if self._embedder_facts is None:
            info: embedder_pb2.EmbedderInfo = await self.embedder.call(
                "Info", common_pb2.InfoRequest()
            )
            self._embedder_facts = EmbedderFacts(
                info.dimension, info.max_length, info.passage_prefix
            )
        return self._embedder_facts

    async def generator_info(self) -> generator_pb2.GeneratorInfo:
        """The generator's model, context window and output limit; asked once, then cached."""
        if self._generator_info is None:
            self._generator_info = await self.generator.call(
                "Info", common_pb2.InfoRequest(), timeout_s=self.settings.request_timeout_s
            )
        return self._generator_info

    async def health(self) -> dict[str, tuple[str, str, float]]:
        async def one(client: ServiceClient) -> tuple[str, str, float]:
            start = time.perf_counter()
            status = await client.health(timeout_s=2.0)
            return status, client.target, (time.perf_counter() - start) * 1000

        clients = self.all()
        results = await asyncio.gather(*(one(c) for c in clients.values()))
        return dict(zip(clients, results, strict=True))

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.all().values()))
