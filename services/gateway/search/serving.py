"""Retrieval as a RetrievalPlan says: embed the query once, search each collection (dense,
sparse or hybrid), rerank with the cross-encoder when the plan says so. Used by /v1/search
and by the chat's retrieval stage."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from services.gateway.http.clients import Services
from services.gateway.search.passage import Passage
from services.gateway.search.plan import RetrievalPlan
from services.gateway.search.protocol import RerankFusion, SearchMode
from shared.errors import DeadlineExceeded, RagrailError, Unavailable
from shared.proto.ragrail.v1 import retriever_pb2

log = logging.getLogger("ragrail.gateway")


@dataclass
class Retrieved:
    """One collection's passages, best first, and how they were found."""

    collection: str
    passages: list[Passage]
    reranked: bool = False
    warnings: list[str] = field(default_factory=list)
    embed_ms: float = 0.0
    retrieval_ms: float = 0.0
    rerank_ms: float = 0.0
    total_ms: float = 0.0


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


async def retrieve(
    services: Services, plan: RetrievalPlan, query: str, *, timeout_s: float | None = None
) -> list[Retrieved]:
    """Searches every collection of the plan, each reranked when the plan says so. A
    reranker that is down or failing degrades a result to first-stage order with a warning."""
    started = time.perf_counter()
    vector: list[float] = []
    if plan.mode != SearchMode.sparse:
        vector = await services.embedder.embed_query(query, timeout_s=timeout_s)
    embed_s = time.perf_counter() - started
    searches = [
        _collection(services, plan, query, vector, name, embed_s, timeout_s)
        for name in plan.collections
    ]
    if len(searches) == 1:  # /v1/search: no task to schedule on the hottest route
        return [await searches[0]]
    return list(await asyncio.gather(*searches))


async def _collection(
    services: Services,
    plan: RetrievalPlan,
    query: str,
    vector: list[float],
    collection: str,
    embed_s: float,
    timeout_s: float | None,
) -> Retrieved:
    start = time.perf_counter()
    hits = await services.retriever.search(
        collection,
        query_text=query,
        query_vector=vector,
        mode=plan.mode,  # type: ignore[arg-type]  # a StrEnum of the same names
        fetch_k=plan.fetch_k,
        fusion=plan.fusion,  # type: ignore[arg-type]
        filter=plan.filter,
        rrf_k=plan.rrf_k,
        dense_weight=plan.dense_weight,
        sparse_weight=plan.sparse_weight,
        timeout_s=timeout_s,
    )
    retrieved = time.perf_counter()
    result = Retrieved(collection, [], embed_ms=_ms(embed_s), retrieval_ms=_ms(retrieved - start))
    passages: list[Passage] | None = None
    if plan.rerank and hits:
        try:
            passages = await _rerank(services, plan, query, hits, collection, timeout_s)
        except (Unavailable, DeadlineExceeded) as exc:
            # Degrade, do not fail: first-stage results are still a useful answer.
            result.warnings.append(f"not reranked: {exc.message}")
            log.warning("rerank skipped", extra={"error": exc.message})
        except RagrailError as exc:
            result.warnings.append(f"not reranked: reranker failed ({exc.message})")
            log.warning("rerank failed", extra={"error": exc.message})
    result.reranked = passages is not None
    if passages is None:
        passages = [Passage.from_hit(h, collection) for h in hits[: plan.keep_k]]
    result.passages = passages
    done = time.perf_counter()
    result.rerank_ms = _ms(done - retrieved) if plan.rerank else 0.0
    result.total_ms = _ms(embed_s + done - start)
    return result


async def _rerank(
    services: Services,
    plan: RetrievalPlan,
    query: str,
    hits: Sequence[retriever_pb2.SearchHit],
    collection: str,
    timeout_s: float | None,
) -> list[Passage]:
    assert services.reranker is not None
    fused = plan.rerank_fusion == RerankFusion.rrf
    ranked = await services.reranker.rerank(
        query,
        [(h.chunk.id, h.chunk.text) for h in hits],
        top_n=0 if fused else plan.keep_k,  # fusion needs every candidate's rerank position
        timeout_s=timeout_s,
    )
    if not fused:
        return [Passage.from_hit(hits[r.index], collection, rerank_score=r.score) for r in ranked]
    # Reciprocal rank fusion of the first stage's order and the cross-encoder's: a reranker
    # that is good but not better than the first stage on every query still adds its signal
    # without discarding what the first stage got right.
    k = plan.rerank_rrf_k
    score = {r.index: 1.0 / (k + rank) for rank, r in enumerate(ranked, start=1)}
    rerank_score = {r.index: r.score for r in ranked}
    for rank in range(1, len(hits) + 1):
        score[rank - 1] = score.get(rank - 1, 0.0) + 1.0 / (k + rank)
    order = sorted(score, key=lambda i: -score[i])[: plan.keep_k]  # ties keep the rerank order
    return [
        Passage.from_hit(hits[i], collection, rerank_score=rerank_score.get(i), score=score[i])
        for i in order
    ]


def merge(results: list[Retrieved], keep: int) -> list[Passage]:
    """The best `keep` passages over one or more collections: by score when every collection
    was reranked by the same cross-encoder (comparable scores), else by rank, round-robin."""
    if len(results) == 1:
        merged = results[0].passages
    elif all(r.reranked for r in results):
        merged = sorted((p for r in results for p in r.passages), key=lambda p: -p.score)
    else:
        blocks = [r.passages for r in results]
        longest = max(len(b) for b in blocks)
        merged = [b[i] for i in range(longest) for b in blocks if i < len(b)]
    return merged[:keep]
