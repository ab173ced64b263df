"""One search: embed the query, retrieve (dense, sparse or hybrid), optionally rerank. Used by
/v1/search and by the chat pipeline's retrieval stage."""

from __future__ import annotations

import logging
import time

from services.gateway import schemas
from services.gateway.clients import Services
from services.gateway.settings import GatewaySettings
from shared.errors import DeadlineExceeded, FailedPrecondition, RagrailError, Unavailable
from shared.proto.ragrail.v1 import common_pb2, embedder_pb2, reranker_pb2, retriever_pb2
from shared.structs import dict_to_struct, struct_to_dict

log = logging.getLogger("ragrail.gateway")
# First-stage depth when reranking and the request does not say (the NVIDIA RAG blueprint's
# vdb_top_k default is 100; 50 keeps a CPU cross-encoder under ~0.5 s).
DEFAULT_RERANK_DEPTH = 50

_MODES = {
    schemas.SearchMode.dense: retriever_pb2.SEARCH_MODE_DENSE,
    schemas.SearchMode.sparse: retriever_pb2.SEARCH_MODE_SPARSE,
    schemas.SearchMode.hybrid: retriever_pb2.SEARCH_MODE_HYBRID,
}
_FUSIONS = {
    schemas.FusionMethod.rrf: retriever_pb2.FUSION_METHOD_RRF,
    schemas.FusionMethod.weighted: retriever_pb2.FUSION_METHOD_WEIGHTED,
}


def _hit(
    h: retriever_pb2.SearchHit,
    rerank_score: float | None = None,
    fused_score: float | None = None,
) -> schemas.SearchHit:
    score = h.score if rerank_score is None else rerank_score
    return schemas.SearchHit(
        chunk_id=h.chunk.id,
        document_id=h.chunk.document_id,
        document_name=h.chunk.document_name,
        chunk_index=h.chunk.chunk_index,
        text=h.chunk.text,
        score=fused_score if fused_score is not None else score,
        dense_score=h.dense_score if h.dense_rank else None,
        sparse_score=h.sparse_score if h.sparse_rank else None,
        rerank_score=rerank_score,
        metadata=struct_to_dict(h.chunk.metadata),
    )


async def _rerank(
    services: Services,
    query: str,
    hits: list[retriever_pb2.SearchHit],
    keep: int,
    timeout_s: float | None,
    fusion: schemas.RerankFusion,
    rrf_k: int,
) -> list[schemas.SearchHit]:
    assert services.reranker is not None
    fused = fusion == schemas.RerankFusion.rrf
    reply = await services.reranker.call(
        "Rerank",
        reranker_pb2.RerankRequest(
            query=query,
            passages=[common_pb2.TextPassage(id=h.chunk.id, text=h.chunk.text) for h in hits],
            top_n=0 if fused else keep,  # fusion needs every candidate's rerank position
        ),
        timeout_s=timeout_s,
    )
    if not fused:
        return [_hit(hits[r.index], r.score) for r in reply.results]
    # Reciprocal rank fusion of the first stage's order and the cross-encoder's: a reranker
    # that is good but not better than the first stage on every query still adds its signal
    # without discarding what the first stage got right.
    score = {r.index: 1.0 / (rrf_k + rank) for rank, r in enumerate(reply.results, start=1)}
    rerank_score = {r.index: r.score for r in reply.results}
    for rank in range(1, len(hits) + 1):
        score[rank - 1] = score.get(rank - 1, 0.0) + 1.0 / (rrf_k + rank)
    order = sorted(score, key=lambda i: -score[i])[:keep]  # stable: ties keep the rerank order
    return [_hit(hits[i], rerank_score.get(i), fused_score=score[i]) for i in order]


async def run_search(
    services: Services,
    settings: GatewaySettings,
    body: schemas.SearchRequest,
    *,
    timeout_s: float | None = None,
) -> schemas.SearchResponse:
    """Searches a collection by meaning (dense), keywords (sparse BM25) or both (hybrid), then
    reranks the first stage with a cross-encoder when a reranker is configured. A reranker that
    is down or failing degrades the answer to first-stage results with a warning."""
    rerank = services.reranker is not None if body.rerank is None else body.rerank
    if rerank and services.reranker is None:
        raise FailedPrecondition(
            "rerank was requested but no reranker is configured; set "
            "RAGRAIL_GATEWAY_RERANKER_URL or send rerank: false"
        )
    top_k = body.top_k or settings.default_top_k
    final_k = (body.reranker_top_k or top_k) if rerank else top_k
    depth = body.vdb_top_k or (max(DEFAULT_RERANK_DEPTH, final_k) if rerank else top_k)

    started = time.perf_counter()
    vector: list[float] = []
    if body.mode != schemas.SearchMode.sparse:
        reply = await services.embedder.call(
            "Embed",
            embedder_pb2.EmbedRequest(texts=[body.query], input_type=embedder_pb2.INPUT_TYPE_QUERY),
            timeout_s=timeout_s,
        )
        vector = list(reply.embeddings[0].values)
    embedded = time.perf_counter()
    request = retriever_pb2.SearchRequest(
        collection=body.collection,
        query_text=body.query,
        query_vector=vector,
        mode=_MODES[body.mode],
        top_k=max(depth, final_k),
        fusion=_FUSIONS[body.fusion],
        rrf_k=body.rrf_k or 0,
        dense_weight=body.dense_weight or 0.0,
        sparse_weight=body.sparse_weight or 0.0,
    )
    if body.filter:
        request.filter.CopyFrom(dict_to_struct(body.filter))
    result = await services.retriever.call("Search", request, timeout_s=timeout_s)
    retrieved = time.perf_counter()

    warnings: list[str] = []
    hits: list[schemas.SearchHit] | None = None
    if rerank and result.hits:
        try:
            fusion = body.rerank_fusion or settings.rerank_fusion
            hits = await _rerank(
                services,
                body.query,
                list(result.hits),
                final_k,
                timeout_s,
                schemas.RerankFusion(fusion),
                settings.rerank_rrf_k,
            )
        except (Unavailable, DeadlineExceeded) as exc:
            # Degrade, do not fail: first-stage results are still a useful answer.
            warnings.append(f"not reranked: {exc.message}")
            log.warning("rerank skipped", extra={"error": exc.message})
        except RagrailError as exc:
            warnings.append(f"not reranked: reranker failed ({exc.message})")
            log.warning("rerank failed", extra={"error": exc.message})
    reranked = hits is not None
    if hits is None:
        hits = [_hit(h) for h in result.hits[:final_k]]
    done = time.perf_counter()
    return schemas.SearchResponse(
        collection=body.collection,
        mode=body.mode,
        reranked=reranked,
        warnings=warnings,
        hits=hits,
        timings=schemas.SearchTimings(
            embed_ms=round((embedded - started) * 1000, 2),
            retrieval_ms=round((retrieved - embedded) * 1000, 2),
            rerank_ms=round((done - retrieved) * 1000, 2) if rerank else 0.0,
            total_ms=round((done - started) * 1000, 2),
        ),
    )
