"""Typed client of the reranker service (Rerank)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.clients.base import TypedClient
from shared.proto.ragrail.v1 import common_pb2, reranker_pb2, reranker_pb2_grpc


@dataclass(frozen=True, slots=True)
class Ranked:
    index: int  # position of the passage in the request
    score: float  # the cross-encoder's


class RerankerClient(TypedClient[reranker_pb2_grpc.RerankerStub]):
    service = "reranker"
    stub_cls = reranker_pb2_grpc.RerankerStub

    async def rerank(
        self,
        query: str,
        passages: Sequence[tuple[str, str]],
        *,
        top_n: int = 0,
        timeout_s: float | None = None,
    ) -> list[Ranked]:
        """(id, text) passages ordered by the cross-encoder, best first; top_n 0 keeps all."""
        reply: reranker_pb2.RerankResponse = await self.rpc.call(
            "Rerank",
            reranker_pb2.RerankRequest(
                query=query,
                passages=[common_pb2.TextPassage(id=i, text=t) for i, t in passages],
                top_n=top_n,
            ),
            timeout_s=timeout_s,
        )
        return [Ranked(r.index, r.score) for r in reply.results]
