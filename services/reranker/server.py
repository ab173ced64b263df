"""Reranker gRPC servicer: validates requests, scores passages, orders and filters them."""

from __future__ import annotations

import asyncio
import math

import grpc
import numpy as np

from services.reranker.backends import load_backend
from services.reranker.backends.base import RerankBackend
from services.reranker.settings import RerankerSettings
from shared.errors import InvalidArgument
from shared.proto.ragrail.v1 import common_pb2, reranker_pb2, reranker_pb2_grpc
from shared.server import BlockingRunner, Built, ServiceSpec
from shared.version import VERSION


class RerankerServicer(reranker_pb2_grpc.RerankerServicer):
    def __init__(self, backend: RerankBackend, settings: RerankerSettings) -> None:
        self.backend = backend
        self.settings = settings
        # One model, one forward pass at a time: two concurrent passes only fight for the cores.
        self._model_thread = BlockingRunner(1, "rerank")

    def _validate(self, request: reranker_pb2.RerankRequest) -> None:
        limit = self.settings.max_text_chars
        if not request.query.strip():
            raise InvalidArgument("query is empty or whitespace; send the text to rank against")
        if len(request.query) > limit:
            raise InvalidArgument(
                f"query has {len(request.query)} characters; the limit is {limit} "
                "(RAGRAIL_RERANKER_MAX_TEXT_CHARS)"
            )
        if request.top_n < 0:
            raise InvalidArgument(f"top_n is {request.top_n}; use 0 for all passages or N > 0")
        if request.HasField("score_threshold") and not math.isfinite(request.score_threshold):
            raise InvalidArgument(f"score_threshold is {request.score_threshold}; send a number")
        if len(request.passages) > self.settings.max_passages:
            raise InvalidArgument(
                f"{len(request.passages)} passages in one request; the limit is "
                f"{self.settings.max_passages} (RAGRAIL_RERANKER_MAX_PASSAGES): split the request"
            )
        for i, passage in enumerate(request.passages):
            if not passage.text.strip():
                raise InvalidArgument(f"passages[{i}].text is empty or whitespace; remove it")
            if len(passage.text) > limit:
                raise InvalidArgument(
                    f"passages[{i}].text has {len(passage.text)} characters; the limit is "
                    f"{limit} (RAGRAIL_RERANKER_MAX_TEXT_CHARS): chunk it first"
                )

    async def Rerank(
        self, request: reranker_pb2.RerankRequest, context: grpc.aio.ServicerContext
    ) -> reranker_pb2.RerankResponse:
        self._validate(request)
        reply = reranker_pb2.RerankResponse(model=self.backend.model_name)
        if not request.passages:
            return reply
        texts = [p.text for p in request.passages]
        scores = await self._model_thread(self.backend.score, request.query, texts)
        # Highest score first; ties keep the request's order.
        order = np.argsort(-scores, kind="stable")
        if request.HasField("score_threshold"):
            order = order[scores[order] >= request.score_threshold]
        if request.top_n:
            order = order[: request.top_n]
        reply.results.extend(
            reranker_pb2.RankedPassage(
                index=int(i), score=float(scores[i]), passage=request.passages[int(i)]
            )
            for i in order
        )
        return reply

    async def Info(
        self, request: common_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> reranker_pb2.RerankerInfo:
        return reranker_pb2.RerankerInfo(
            service=common_pb2.ServiceInfo(
                service="reranker",
                version=VERSION,
                backend=self.backend.name,
                model=self.backend.model_name,
                details={
                    "device": self.backend.device,
                    "batch_size": str(self.settings.batch_size),
                    "max_passages": str(self.settings.max_passages),
                },
            ),
            max_length=self.backend.max_length,
        )

    async def close(self) -> None:
        self._model_thread.shutdown()


async def build(settings: RerankerSettings) -> Built:
    backend = await asyncio.to_thread(load_backend, settings)
    servicer = RerankerServicer(backend, settings)
    return Built(
        specs=[
            ServiceSpec(
                reranker_pb2.DESCRIPTOR.services_by_name["Reranker"].full_name,
                servicer,
                reranker_pb2_grpc.add_RerankerServicer_to_server,
            )
        ],
        close=servicer.close,
        ready_message={
            "model": backend.model_name,
            "backend": backend.name,
            "max_length": backend.max_length,
        },
    )
