from services.retriever import fusion
from services.retriever.backends.base import ChunkRecord, ScoredChunk


def _scored(ids_scores: list[tuple[str, float]]) -> list[ScoredChunk]:
    return [
        ScoredChunk(ChunkRecord(id=i, document_id="d", text=i, vector=[], metadata={}), s)
        for i, s in ids_scores
    ]


def test_rrf_rewards_agreement_between_modes() -> None:
    dense = _scored([("a", 0.9), ("b", 0.8), ("c", 0.7)])
    sparse = _scored([("b", 12.0), ("c", 11.0), ("d", 3.0)])
    hits = fusion.rrf(dense, sparse, fetch_k=4, k=60)
    assert [h.chunk.id for h in hits] == ["b", "c", "a", "d"]
    b = hits[0]
    assert (b.dense_rank, b.sparse_rank) == (2, 1)
    assert b.score == 1 / 62 + 1 / 61


def test_weighted_normalises_each_mode_before_mixing() -> None:
    dense = _scored([("a", 0.9), ("b", 0.5)])
    sparse = _scored([("b", 30.0), ("a", 10.0)])
    only_dense = fusion.weighted(dense, sparse, fetch_k=2, dense_weight=1.0, sparse_weight=0.0)
    only_sparse = fusion.weighted(dense, sparse, fetch_k=2, dense_weight=0.0, sparse_weight=1.0)
    assert [h.chunk.id for h in only_dense] == ["a", "b"]
    assert [h.chunk.id for h in only_sparse] == ["b", "a"]
    assert only_sparse[0].score == 1.0


def test_fetch_k_cuts_and_ties_are_deterministic() -> None:
    dense = _scored([("x", 0.5), ("y", 0.5)])
    hits = fusion.rrf(dense, [], fetch_k=1)
    assert [h.chunk.id for h in hits] == ["x"]


def test_single_mode_keeps_rank_and_score() -> None:
    hits = fusion.single(_scored([("a", 3.0), ("b", 2.0)]), dense=False)
    assert [(h.chunk.id, h.sparse_rank, h.sparse_score) for h in hits] == [
        ("a", 1, 3.0),
        ("b", 2, 2.0),
    ]
