"""Fuses dense and sparse result lists into one ranking; the same code serves every backend.

Fusing here, not inside the vector database, keeps results identical across Milvus and
FAISS and lets every hit report its per-mode score and rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.retriever.backends.base import ChunkRecord, ScoredChunk


@dataclass
class FusedHit:
    chunk: ChunkRecord
    score: float
    dense_score: float = 0.0
    sparse_score: float = 0.0
    dense_rank: int = 0
    sparse_rank: int = 0
    _order: int = field(default=0, repr=False)


def _collect(dense: list[ScoredChunk], sparse: list[ScoredChunk]) -> dict[str, FusedHit]:
    hits: dict[str, FusedHit] = {}
    for rank, item in enumerate(dense, start=1):
        hits[item.chunk.id] = FusedHit(item.chunk, 0.0, dense_score=item.score, dense_rank=rank)
    for rank, item in enumerate(sparse, start=1):
        hit = hits.setdefault(item.chunk.id, FusedHit(item.chunk, 0.0))
        hit.sparse_score, hit.sparse_rank = item.score, rank
    return hits


def _ranked(hits: dict[str, FusedHit], fetch_k: int) -> list[FusedHit]:
    # Ties broken by best single-mode rank, then id, so results are deterministic.
    def best_rank(h: FusedHit) -> int:
        return min(r for r in (h.dense_rank, h.sparse_rank) if r > 0)

    return sorted(hits.values(), key=lambda h: (-h.score, best_rank(h), h.chunk.id))[:fetch_k]


def rrf(
    dense: list[ScoredChunk], sparse: list[ScoredChunk], fetch_k: int, k: int = 60
) -> list[FusedHit]:
    """Reciprocal rank fusion: score = sum over modes of 1 / (k + rank)."""
    hits = _collect(dense, sparse)
    for hit in hits.values():
        hit.score = sum(1.0 / (k + r) for r in (hit.dense_rank, hit.sparse_rank) if r > 0)
    return _ranked(hits, fetch_k)


def _min_max(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values, default=0.0), max(values, default=0.0)
    return lo, (hi - lo) or 1.0


def weighted(
    dense: list[ScoredChunk],
    sparse: list[ScoredChunk],
    fetch_k: int,
    dense_weight: float = 0.5,
    sparse_weight: float = 0.5,
) -> list[FusedHit]:
    """Weighted sum of min-max normalised scores; a chunk missing from a mode scores 0 there.

    BM25 scores are unbounded and cosine similarities are not, so each list is scaled to
    [0, 1] over its own candidates before weighting.
    """
    hits = _collect(dense, sparse)
    d_lo, d_span = _min_max([s.score for s in dense])
    s_lo, s_span = _min_max([s.score for s in sparse])
    for hit in hits.values():
        d = (hit.dense_score - d_lo) / d_span if hit.dense_rank else 0.0
        s = (hit.sparse_score - s_lo) / s_span if hit.sparse_rank else 0.0
        hit.score = dense_weight * d + sparse_weight * s
    return _ranked(hits, fetch_k)


def single(results: list[ScoredChunk], *, dense: bool) -> list[FusedHit]:
    """One mode's results as hits, keeping that mode's score and rank."""
    out = []
    for rank, item in enumerate(results, start=1):
        hit = FusedHit(item.chunk, item.score)
        if dense:
            hit.dense_score, hit.dense_rank = item.score, rank
        else:
            hit.sparse_score, hit.sparse_rank = item.score, rank
        out.append(hit)
    return out
