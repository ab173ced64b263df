"""The gateway's connections to the services, opened once at start-up: one typed client each
(shared/clients), with the gateway's deadlines."""

from __future__ import annotations

import asyncio
import time

from services.gateway.settings import GatewaySettings
from shared.clients import (
    EmbedderClient,
    GeneratorClient,
    GuardrailsClient,
    RerankerClient,
    RetrieverClient,
    TypedClient,
)


class Services:
    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.embedder = EmbedderClient(settings.embedder_url, timeout_s=settings.request_timeout_s)
        self.retriever = RetrieverClient(
            settings.retriever_url, timeout_s=settings.request_timeout_s
        )
        # Optional stage: without a reranker, searches return first-stage results.
        self.reranker: RerankerClient | None = (
            RerankerClient(
                settings.reranker_url,
                timeout_s=settings.request_timeout_s,
                # Optional stage: when it is down, answer without it quickly.
                connect_timeout_s=0.5,
            )
            if settings.reranker_url
            else None
        )
        self.generator = GeneratorClient(
            settings.generator_url,
            timeout_s=settings.generation_timeout_s,
            info_timeout_s=settings.request_timeout_s,
            info_max_age_s=settings.generator_info_max_age_s,
        )
        # Optional stage: without guardrails, chat goes straight through (and says so).
        self.guardrails: GuardrailsClient | None = (
            GuardrailsClient(settings.guardrails_url, timeout_s=settings.guardrails_timeout_s)
            if settings.guardrails_url
            else None
        )

    def all(self) -> dict[str, TypedClient]:
        clients: dict[str, TypedClient] = {
            "embedder": self.embedder,
            "retriever": self.retriever,
            "generator": self.generator,
        }
        if self.reranker is not None:
            clients["reranker"] = self.reranker
        if self.guardrails is not None:
            clients["guardrails"] = self.guardrails
        return clients

    async def health(self) -> dict[str, tuple[str, str, float]]:
        async def one(client: TypedClient) -> tuple[str, str, float]:
            start = time.perf_counter()
            status = await client.health(timeout_s=2.0)
            return status, client.target, (time.perf_counter() - start) * 1000

        clients = self.all()
        results = await asyncio.gather(*(one(c) for c in clients.values()))
        return dict(zip(clients, results, strict=True))

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.all().values()))
