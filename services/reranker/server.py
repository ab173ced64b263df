"""Reranker gRPC servicer: validates requests, scores passages, orders and filters them."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import grpc
import numpy as np

from services.reranker.backends import load_backend
from services.reranker.settings import RerankerSettings
from shared.errors import InvalidArgument
from shared.models.cross_encoder import CrossEncoder
from shared.models.remote_ranker import RemoteRanker
from shared.models.service import ModelServicer, build_model_service
from shared.proto.ragrail.v1 import common_pb2, reranker_pb2, reranker_pb2_grpc
from shared.server import Built


class RerankerServicer(
    ModelServicer[CrossEncoder, RerankerSettings], reranker_pb2_grpc.RerankerServicer
):
    proto = reranker_pb2
    add_to_server = reranker_pb2_grpc.add_RerankerServicer_to_server

    def _validate(self, request: reranker_pb2.RerankRequest) -> None:
        if not request.query.strip():
            raise InvalidArgument("query is empty or whitespace; send the text to rank against")
        self.check_texts([request.query], "query", "shorten it")
        if request.top_n < 0:
            raise InvalidArgument(f"top_n is {request.top_n}; use 0 for all passages or N > 0")
        if request.HasField("score_threshold") and not math.isfinite(request.score_threshold):
            raise InvalidArgument(f"score_threshold is {request.score_threshold}; send a number")
        if len(request.passages) > self.settings.max_passages:
            raise InvalidArgument(
                f"{len(request.passages)} passages in one request; the limit is "
                f"{self.settings.max_passages}{self.limit_setting('max_passages')}: "
                "split the request"
            )
        self.check_texts([p.text for p in request.passages], "passages[{i}].text")

    async def Rerank(
        self, request: reranker_pb2.RerankRequest, context: grpc.aio.ServicerContext
    ) -> reranker_pb2.RerankResponse:
        self._validate(request)
        reply = reranker_pb2.RerankResponse(model=self.backend.model_name)
        if not request.passages:
            return reply
        texts = [p.text for p in request.passages]
        scores = await self.run_in_parts(
            partial(self.backend.score, request.query), texts, self.backend.batch_size
        )
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

    def ready_message(self) -> dict[str, Any]:
        return {**super().ready_message(), "max_length": self.backend.max_length}

    async def Info(
        self, request: common_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> reranker_pb2.RerankerInfo:
        details = self.backend.details() if isinstance(self.backend, RemoteRanker) else {}
        return reranker_pb2.RerankerInfo(
            service=self.service_info(max_passages=str(self.settings.max_passages), **details),
            max_length=self.backend.max_length,
        )

    async def close(self) -> None:
        await super().close()
        self.backend.close()


async def build(settings: RerankerSettings) -> Built:
    return await build_model_service(settings, load_backend, RerankerServicer)
