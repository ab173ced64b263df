"""How one request retrieves: depths, mode, fusion, reranking, filter and collections, decided
once from the request and the gateway's settings. /v1/search and chat both build one and hand
it to `search.serving.retrieve`; each default is taken from GatewaySettings here and nowhere
else, and the retriever is always sent explicit depths (its own defaults serve other clients).

Two depths, one name each from the request to the retriever call: `fetch_k`, the candidates
taken from the retriever (per collection), and `keep_k`, the chunks kept after reranking. Their
API names (`vdb_top_k`, `top_k`, `reranker_top_k`) exist only in the protocol modules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from services.gateway.search.protocol import FusionMethod, RerankFusion, SearchMode, SearchRequest
from services.gateway.settings import GatewaySettings
from shared.errors import FailedPrecondition


class ChatRetrieval(Protocol):
    """What a chat request says about retrieval (chat/protocol.py's ChatCompletionRequest):
    named by its fields, so that search, which chat retrieves through, imports nothing of it."""

    @property
    def collections(self) -> list[str]: ...

    use_knowledge_base: bool | None
    enable_reranker: bool | None
    fetch_k: int | None
    keep_k: int | None
    search_mode: SearchMode
    filter: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class RetrievalPlan:
    collections: tuple[str, ...]  # empty: no retrieval (chat without a knowledge base)
    mode: SearchMode
    filter: dict[str, Any] | None
    fusion: FusionMethod
    # 0: the retriever's own default (rrf_k 60; weights 0.5 each).
    rrf_k: int
    dense_weight: float
    sparse_weight: float
    fetch_k: int  # chunks taken from the retriever, per collection
    rerank: bool
    rerank_fusion: RerankFusion
    rerank_rrf_k: int
    keep_k: int  # chunks kept in the end (after reranking; over all collections)

    @classmethod
    def for_search(
        cls, body: SearchRequest, settings: GatewaySettings, *, reranker: bool
    ) -> RetrievalPlan:
        """/v1/search: top_k results (default_top_k), or reranker_top_k of search_vdb_top_k
        candidates when reranking."""
        rerank = _rerank(body.rerank, reranker, "rerank")
        keep_k = body.keep_k or settings.default_top_k
        if rerank:
            keep_k = body.reranked_keep_k or keep_k
        return cls(
            collections=(body.collection,),
            mode=body.mode,
            filter=body.filter,
            fusion=body.fusion,
            rrf_k=body.rrf_k or 0,
            dense_weight=body.dense_weight or 0.0,
            sparse_weight=body.sparse_weight or 0.0,
            fetch_k=_fetch_k(body.fetch_k, rerank, settings.search_vdb_top_k, keep_k),
            rerank=rerank,
            rerank_fusion=body.rerank_fusion or RerankFusion(settings.rerank_fusion),
            rerank_rrf_k=settings.rerank_rrf_k,
            keep_k=keep_k,
        )

    @classmethod
    def for_chat(
        cls, req: ChatRetrieval, settings: GatewaySettings, *, reranker: bool
    ) -> RetrievalPlan:
        """A chat: reranker_top_k chunks for the prompt (chat_reranker_top_k), reranked from
        chat_vdb_top_k candidates when a reranker is on."""
        use_kb = req.use_knowledge_base if req.use_knowledge_base is not None else True
        collections = tuple(req.collections) if use_kb else ()
        # Only a chat that retrieves needs the reranker it asks for.
        wanted = req.enable_reranker if collections else False
        rerank = _rerank(wanted, reranker, "enable_reranker")
        keep_k = req.keep_k or settings.chat_reranker_top_k
        return cls(
            collections=collections,
            mode=req.search_mode,
            filter=req.filter,
            fusion=FusionMethod.rrf,
            rrf_k=0,
            dense_weight=0.0,
            sparse_weight=0.0,
            fetch_k=_fetch_k(req.fetch_k, rerank, settings.chat_vdb_top_k, keep_k),
            rerank=rerank,
            rerank_fusion=RerankFusion(settings.rerank_fusion),
            rerank_rrf_k=settings.rerank_rrf_k,
            keep_k=keep_k,
        )


def _rerank(wanted: bool | None, reranker: bool, field: str) -> bool:
    """Rerank when asked, else when a reranker is configured; asked for without one, a 409."""
    if wanted is None:
        return reranker
    if wanted and not reranker:
        raise FailedPrecondition(
            f"{field} was requested but no reranker is configured; set "
            f"RAGRAIL_GATEWAY_RERANKER_URL or send {field}: false"
        )
    return wanted


def _fetch_k(fetch_k: int | None, rerank: bool, rerank_fetch_k: int, keep_k: int) -> int:
    """First-stage depth: what the request asks, else rerank_fetch_k candidates for the
    cross-encoder, else just what is kept (more would be fetched to be thrown away); never
    below keep_k."""
    return max(fetch_k or (rerank_fetch_k if rerank else keep_k), keep_k)
