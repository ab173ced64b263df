"""FaissStore on directories under tmp_path: the behaviours the Milvus backend tests check,
persistence and crash safety, the three index types, and the acceptance test: FAISS `flat`
and Milvus (`FLAT`) rank the same data identically, dense and BM25."""

from __future__ import annotations

import math
import os
import random
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("faiss")
pytest.importorskip("bm25s")

import faiss

from services.retriever.analysis import LexicalAnalyzer
from services.retriever.backends import BACKENDS, load_backend
from services.retriever.backends import faiss as faiss_backend
from services.retriever.backends.base import ChunkRecord, ScoredChunk, VectorStore
from services.retriever.backends.faiss import FaissStore
from services.retriever.filters import matches, parse_filter
from services.retriever.settings import RetrieverSettings
from shared.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unavailable,
)
from tests.retriever.test_milvus_backend import DIM, make_chunk, run_in_new_process, unit

INDEX_TYPES = ["flat", "hnsw", "ivf"]


@pytest.fixture
def faiss_dir(tmp_path: Path) -> str:
    return str(tmp_path / "data" / "faiss")


@pytest.fixture
def store(faiss_dir: str) -> Iterator[FaissStore]:
    s = FaissStore(faiss_dir)
    yield s
    s.close()


def six_chunks() -> list[ChunkRecord]:
    """The Milvus tests' collection: three documents of 2, 3 and 1 chunks."""
    return [
        make_chunk("a", 0, "Graphene conducts electricity", unit(1, 0, 0, 0),
                   {"year": 2019, "tag": "physics"}),
        make_chunk("a", 1, "graphene sheets are strong", unit(1, 1, 0, 0),
                   {"year": 2019, "tag": "physics"}),
        make_chunk("b", 0, "Protein folding with neural networks", unit(0, 1, 0, 0),
                   {"year": 2021, "tag": "biology", "open": True}),
        make_chunk("b", 1, "neural networks predict structures", unit(0, 1, 1, 0),
                   {"year": 2021, "tag": "biology"}),
        make_chunk("b", 2, "the folding problem", unit(0, 0, 1, 0),
                   {"year": 2022, "tag": "ml"}),
        make_chunk("c", 0, "Quantum error correction codes", unit(0, 0, 0, 1),
                   {"year": 2023.5, "tag": "physics"}),
    ]  # fmt: skip


@pytest.fixture
def docs(store: FaissStore) -> FaissStore:
    store.create_collection("docs", DIM, "test docs")
    store.upsert("docs", six_chunks())
    return store


def ids(hits: list[ScoredChunk]) -> list[str]:
    return [h.chunk.id for h in hits]


def index_files(directory: str, collection: str = "docs") -> list[str]:
    return sorted(p.name for p in (Path(directory) / collection).glob("index-*.faiss"))


# -- registry and settings -------------------------------------------------------------


def test_registry_builds_each_backend_from_settings(tmp_path: Path) -> None:
    assert set(BACKENDS) == {"milvus", "faiss"}
    settings = RetrieverSettings(
        backend="faiss",
        faiss_dir=str(tmp_path / "f"),
        faiss_index="hnsw",
        faiss_use_gpu="never",
        bm25_language="",
    )
    s = load_backend(settings)
    try:
        assert isinstance(s, FaissStore) and isinstance(s, VectorStore) and s.name == "faiss"
        facts = s.describe()
        assert facts["index_type"] == "hnsw" and facts["gpu"] == "no"
        assert facts["analyzer"] == "words+lowercase+stop33+stem:none"
        assert facts["directory"] == str(tmp_path / "f")
    finally:
        s.close()
    pytest.importorskip("pymilvus")
    milvus = load_backend(
        RetrieverSettings(milvus_uri=str(tmp_path / "m.db"), milvus_index_type="FLAT")
    )
    try:
        assert milvus.name == "milvus" and milvus.describe()["index_type"] == "FLAT"
    finally:
        milvus.close()


def test_registry_rejects_unknown_backend() -> None:
    with pytest.raises(ValueError, match="backend"):
        RetrieverSettings(backend="chroma")
    # Settings validate the name; load_backend still answers a bypassed one clearly.
    bypassed = RetrieverSettings.model_construct(backend="chroma")
    with pytest.raises(InvalidArgument, match=r"unknown retriever backend 'chroma'.*'faiss'"):
        load_backend(bypassed)


# -- collections -----------------------------------------------------------------------


def test_creates_parent_directories_and_describes_itself(store: FaissStore, faiss_dir: str) -> None:
    assert Path(faiss_dir).is_dir() and (Path(faiss_dir) / "LOCK").is_file()
    facts = store.describe()
    assert facts["directory"] == faiss_dir and facts["index_type"] == "flat"
    assert facts["gpu"] == ("yes" if faiss.get_num_gpus() > 0 else "no")  # use_gpu "auto"
    assert facts["analyzer"] == "words+lowercase+stop33+stem:english"
    assert all(isinstance(v, str) for v in facts.values())


def test_collection_lifecycle(store: FaissStore, faiss_dir: str) -> None:
    created = store.create_collection("papers", DIM, "Research papers ✓")
    assert (created.name, created.dimension, created.description) == (
        "papers",
        DIM,
        "Research papers ✓",
    )
    assert created.created_at > 0
    store.create_collection("abstracts", 8)
    assert store.get_collection("papers") == created
    assert [c.name for c in store.list_collections()] == ["abstracts", "papers"]
    assert store.list_collections()[0].dimension == 8
    with pytest.raises(AlreadyExists, match="'papers' already exists"):
        store.create_collection("papers", DIM)
    store.delete_collection("papers")
    assert [c.name for c in store.list_collections()] == ["abstracts"]
    assert sorted(os.listdir(faiss_dir)) == ["LOCK", "abstracts"]
    with pytest.raises(NotFound):
        store.get_collection("papers")
    store.create_collection("papers", DIM)  # the name is free again, and the data gone
    assert store.count("papers") == (0, 0)


@pytest.mark.parametrize("name", ["", "Papers", "1papers", "pa-pers", "p" * 65, "papers\n", ".."])
def test_invalid_collection_names(store: FaissStore, name: str) -> None:
    with pytest.raises(InvalidArgument, match="lowercase letters"):
        store.create_collection(name, DIM)
    with pytest.raises(InvalidArgument, match="lowercase letters"):
        store.count(name)


@pytest.mark.parametrize("dimension", [0, -1, 40_000])
def test_invalid_dimension(store: FaissStore, dimension: int) -> None:
    with pytest.raises(InvalidArgument, match="dimension must be between"):
        store.create_collection("papers", dimension)


def test_every_method_reports_a_missing_collection(store: FaissStore) -> None:
    calls = [
        lambda: store.get_collection("nope"),
        lambda: store.delete_collection("nope"),
        lambda: store.count("nope"),
        lambda: store.upsert("nope", [make_chunk("a", 0)]),
        lambda: store.delete_stale_chunks("nope", ["a"], []),
        lambda: store.delete_documents("nope", ["a"]),
        lambda: store.list_documents("nope", 10, 0),
        lambda: store.dense_search("nope", unit(1, 0, 0, 0), 3, None),
        lambda: store.sparse_search("nope", "graphene", 3, None),
    ]
    for call in calls:
        with pytest.raises(NotFound) as err:
            call()
        assert err.value.message == (
            "collection 'nope' does not exist; create it with POST /v1/collections"
        )


# -- writing ---------------------------------------------------------------------------


def test_counts_are_exact(docs: FaissStore) -> None:
    assert docs.count("docs") == (6, 3)
    docs.upsert("docs", [make_chunk("d", 0), make_chunk("d", 1)])
    assert docs.count("docs") == (8, 4)
    docs.delete_documents("docs", ["a"])
    assert docs.count("docs") == (6, 3)


def test_upsert_replaces_by_id(docs: FaissStore) -> None:
    replacement = make_chunk("a", 0, "Superconductors at room temperature", unit(0, 0, 1, 1),
                             {"year": 2024})  # fmt: skip
    assert docs.upsert("docs", [replacement]) == 1
    docs.upsert("docs", [replacement])
    assert docs.count("docs") == (6, 3)
    assert "a:0" not in ids(docs.sparse_search("docs", "conducts", 5, None))
    hits = docs.sparse_search("docs", "superconductors", 5, None)
    assert ids(hits) == ["a:0"]
    assert hits[0].chunk.metadata == {"year": 2024}  # replaced, not merged
    # The old vector is gone from the dense index too.
    dense = docs.dense_search("docs", unit(0, 0, 1, 1), 1, None)
    assert ids(dense) == ["a:0"] and dense[0].score == pytest.approx(1.0, abs=1e-5)


def test_duplicate_ids_in_one_batch_keep_the_last(docs: FaissStore) -> None:
    first = make_chunk("e", 0, "first version")
    last = make_chunk("e", 0, "last version")
    assert docs.upsert("docs", [first, last]) == 1
    assert [h.chunk.text for h in docs.sparse_search("docs", "version", 5, None)] == [
        "last version"
    ]


def test_empty_upsert_still_checks_the_collection(docs: FaissStore) -> None:
    assert docs.upsert("docs", []) == 0
    with pytest.raises(NotFound):
        docs.upsert("nope", [])


@pytest.mark.parametrize(
    ("chunk", "fragment"),
    [
        (
            make_chunk("x", 0, vector=[1.0, 0.0]),
            "2-dimensional vector but collection 'docs' stores 4",
        ),
        (make_chunk("x", 0, vector=[]), "0-dimensional"),
        (make_chunk("x", 0, vector=[1.0, math.nan, 0.0, 0.0]), "NaN or infinity"),
        (make_chunk("x", 0, vector=[0.0, 0.0, 0.0, 0.0]), "all zeros"),
        (make_chunk("x", 0, chunk_id=""), "id is empty"),
        (make_chunk("x", 0, chunk_id="bad\ud800"), "not valid Unicode"),
        (make_chunk("x", 0, metadata={"bad": {1, 2}}), "metadata is not plain JSON"),
        (make_chunk("x", 0, metadata={"nan": math.nan}), "metadata is not plain JSON"),
        (ChunkRecord("x:0", "x", "t", unit(1, 0, 0, 0), {}, "x", -1), "chunk_index"),
    ],
)
def test_upsert_rejects_bad_chunks(docs: FaissStore, chunk: ChunkRecord, fragment: str) -> None:
    with pytest.raises(InvalidArgument, match="chunk '") as err:
        docs.upsert("docs", [make_chunk("ok", 0), chunk])
    assert fragment in err.value.message
    assert docs.count("docs") == (6, 3)  # nothing of the batch was written


def test_vectors_are_stored_normalised(docs: FaissStore) -> None:
    docs.upsert("docs", [make_chunk("n", 0, vector=[3.0, 0.0, 4.0, 0.0])])
    hits = docs.dense_search("docs", [6.0, 0.0, 8.0, 0.0], 2, None, include_vectors=True)
    assert ids(hits) == ["n:0", "b:2"]
    assert hits[0].chunk.vector == pytest.approx([0.6, 0.0, 0.8, 0.0])
    # Cosine similarities, whatever the lengths of the stored and the query vector.
    assert [h.score for h in hits] == pytest.approx([1.0, 0.8], abs=1e-6)


def test_delete_documents_counts_chunks(docs: FaissStore) -> None:
    assert docs.delete_documents("docs", ["b", "missing", "b"]) == 3
    assert docs.delete_documents("docs", ["b"]) == 0
    assert docs.delete_documents("docs", []) == 0
    assert {h.chunk.document_id for h in docs.dense_search("docs", unit(1, 1, 1, 1), 10, None)} == {
        "a",
        "c",
    }


def test_delete_stale_chunks(docs: FaissStore) -> None:
    deleted = docs.delete_stale_chunks("docs", ["b"], ["b:0", "b:1", "a:0"])
    assert deleted == 1
    assert docs.count("docs") == (5, 3)
    assert docs.delete_stale_chunks("docs", ["b"], ["b:0", "b:1"]) == 0
    assert docs.delete_stale_chunks("docs", ["a", "c"], []) == 3
    assert docs.count("docs") == (2, 1)
    assert set(ids(docs.dense_search("docs", unit(1, 1, 1, 1), 10, None))) == {"b:0", "b:1"}


def test_ids_with_quotes_and_backslashes(docs: FaissStore) -> None:
    doc = "we\"ird\\doc's"
    docs.upsert("docs", [make_chunk(doc, 0), make_chunk(doc, 1)])
    page, _ = docs.list_documents("docs", 10, 0)
    assert next(d for d in page if d.id == doc).num_chunks == 2
    assert docs.delete_stale_chunks("docs", [doc], [f"{doc}:0"]) == 1
    assert docs.delete_documents("docs", [doc]) == 1
    assert docs.count("docs") == (6, 3)


# -- listing documents -----------------------------------------------------------------


def test_list_documents_pages_sorted_by_id(docs: FaissStore) -> None:
    page, total = docs.list_documents("docs", 2, 0)
    assert total == 3
    assert [(d.id, d.name, d.num_chunks) for d in page] == [("a", "a.pdf", 2), ("b", "b.pdf", 3)]
    assert page[1].metadata == {"year": 2021, "tag": "biology", "open": True}  # chunk 0's
    page, total = docs.list_documents("docs", 2, 2)
    assert ([d.id for d in page], total) == (["c"], 3)
    assert docs.list_documents("docs", 2, 10) == ([], 3)
    assert docs.list_documents("docs", 0, 0) == ([], 3)
    with pytest.raises(InvalidArgument, match="must not be negative"):
        docs.list_documents("docs", -1, 0)


def test_list_documents_of_an_empty_collection(store: FaissStore) -> None:
    store.create_collection("empty", DIM)
    assert store.list_documents("empty", 10, 0) == ([], 0)
    assert store.count("empty") == (0, 0)
    assert store.dense_search("empty", unit(1, 0, 0, 0), 5, None) == []
    assert store.sparse_search("empty", "graphene", 5, None) == []


# -- search ----------------------------------------------------------------------------


def test_dense_search_scores_are_cosine_similarities(docs: FaissStore) -> None:
    query = unit(1, 0.2, 0, 0)
    hits = docs.dense_search("docs", query, 3, None)
    assert ids(hits) == ["a:0", "a:1", "b:0"]
    expected = sum(q * v for q, v in zip(query, unit(1, 0, 0, 0), strict=True))
    assert hits[0].score == pytest.approx(expected, abs=1e-5)
    assert hits[0].score >= hits[1].score >= hits[2].score
    first = hits[0].chunk
    assert (first.document_id, first.document_name, first.chunk_index) == ("a", "a.pdf", 0)
    assert first.text == "Graphene conducts electricity"
    assert first.metadata == {"year": 2019, "tag": "physics"}
    assert first.vector == []


def test_dense_search_can_return_vectors(docs: FaissStore) -> None:
    hit = docs.dense_search("docs", unit(0, 0, 0, 1), 1, None, include_vectors=True)[0]
    assert hit.chunk.id == "c:0"
    assert hit.chunk.vector == pytest.approx(unit(0, 0, 0, 1))


def test_dense_search_checks_the_query(docs: FaissStore) -> None:
    with pytest.raises(InvalidArgument, match="3 dimensions but collection 'docs' stores 4"):
        docs.dense_search("docs", [1.0, 0.0, 0.0], 3, None)
    with pytest.raises(InvalidArgument, match="NaN or infinity"):
        docs.dense_search("docs", [1.0, math.inf, 0.0, 0.0], 3, None)
    with pytest.raises(InvalidArgument, match="k must be between"):
        docs.dense_search("docs", unit(1, 0, 0, 0), 0, None)


def test_k_larger_than_the_collection(docs: FaissStore) -> None:
    assert len(docs.dense_search("docs", unit(1, 1, 1, 1), 1000, None)) == 6
    assert set(ids(docs.sparse_search("docs", "graphene folding", 1000, None))) == {
        "a:0",
        "a:1",
        "b:0",
        "b:2",
    }


def test_sparse_search_is_bm25_best_first(docs: FaissStore) -> None:
    hits = docs.sparse_search("docs", "neural networks folding", 10, None)
    found = ids(hits)
    assert found[:2] == ["b:0", "b:1"] or found[:2] == ["b:1", "b:0"]
    assert set(found) == {"b:0", "b:1", "b:2"}
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert docs.sparse_search("docs", "GRAPHENE", 1, None)[0].chunk.document_id == "a"


def test_sparse_search_ignores_stop_words_and_blank_queries(docs: FaissStore) -> None:
    assert docs.sparse_search("docs", "the", 5, None) == []
    assert docs.sparse_search("docs", "   ", 5, None) == []
    assert docs.sparse_search("docs", "unheardofword", 5, None) == []


def test_bm25_matches_word_forms(docs: FaissStore) -> None:
    assert {h.chunk.id for h in docs.sparse_search("docs", "fold", 5, None)} == {"b:0", "b:2"}
    assert {h.chunk.id for h in docs.sparse_search("docs", "folds", 5, None)} == {"b:0", "b:2"}


def test_bm25_index_is_rebuilt_lazily_after_writes(docs: FaissStore) -> None:
    docs.sparse_search("docs", "graphene", 5, None)
    builds = docs.bm25_builds
    docs.sparse_search("docs", "folding", 5, None)
    assert docs.bm25_builds == builds  # no write, no rebuild
    docs.upsert("docs", [make_chunk("z", 0, "zeppelin airships")])
    docs.upsert("docs", [make_chunk("z", 1, "more zeppelin airships")])
    assert docs.bm25_builds == builds  # writes do not rebuild...
    assert ids(docs.sparse_search("docs", "zeppelin", 5, None)) == ["z:0", "z:1"]
    assert docs.bm25_builds == builds + 1  # ...the next search does, once


def test_searches_see_writes_at_once(docs: FaissStore) -> None:
    docs.upsert("docs", [make_chunk("z", 0, "zeppelin airships", unit(1, 1, 1, 1))])
    assert docs.sparse_search("docs", "zeppelin", 1, None)[0].chunk.id == "z:0"
    assert docs.dense_search("docs", unit(1, 1, 1, 1), 1, None)[0].chunk.id == "z:0"
    docs.delete_documents("docs", ["z"])
    assert docs.sparse_search("docs", "zeppelin", 1, None) == []
    assert "z:0" not in ids(docs.dense_search("docs", unit(1, 1, 1, 1), 10, None))


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"year": {"$gte": 2020}}, {"b:0", "b:1", "b:2", "c:0"}),
        ({"year": {"$gt": 2023}}, {"c:0"}),
        ({"year": 2021.0}, {"b:0", "b:1"}),
        ({"tag": {"$in": ["physics", "ml"]}}, {"a:0", "a:1", "b:2", "c:0"}),
        ({"tag": {"$nin": ["physics", "ml"]}}, {"b:0", "b:1"}),
        ({"tag": {"$ne": "physics"}}, {"b:0", "b:1", "b:2"}),
        ({"open": True}, {"b:0"}),
        ({"open": {"$ne": True}}, set()),
        ({"document_id": {"$in": ["a", "c"]}}, {"a:0", "a:1", "c:0"}),
        ({"document_id": {"$nin": ["a", "c"]}}, {"b:0", "b:1", "b:2"}),
        ({"document_name": "c.pdf"}, {"c:0"}),
        ({"tag": "physics", "year": {"$lt": 2020}}, {"a:0", "a:1"}),
        ({"tag": 'physics" or metadata["tag"] != "'}, set()),
        ({"tag": "missing\\"}, set()),
    ],
)
def test_filters_in_both_searches(
    docs: FaissStore, flt: dict[str, Any], expected: set[str]
) -> None:
    parsed = parse_filter(flt)
    dense = docs.dense_search("docs", unit(1, 1, 1, 1), 10, parsed, include_vectors=True)
    assert {h.chunk.id for h in dense} == expected
    assert all(matches(parsed, h.chunk) for h in dense)
    sparse = docs.sparse_search("docs", "graphene neural folding quantum the", 10, parsed)
    assert {h.chunk.id for h in sparse} <= expected


@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_selective_filters_search_deep_enough(tmp_path: Path, index_type: str) -> None:
    """Only the 5 chunks least like the query match: progressive deepening must reach them,
    and return them in the exact order, on every index type."""
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((400, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = vectors[0]
    order = np.argsort(-(vectors @ query), kind="stable")
    rare = {int(i) for i in order[-5:]}
    s = FaissStore(str(tmp_path / index_type), index_type=index_type, ivf_nlist=4)
    try:
        s.create_collection("docs", 16)
        s.upsert(
            "docs",
            [
                make_chunk("d", i, f"text {i}", vectors[i].tolist(), {"rare": i in rare})
                for i in range(400)
            ],
        )
        hits = s.dense_search("docs", query.tolist(), 3, parse_filter({"rare": True}))
        assert ids(hits) == [f"d:{int(i)}" for i in order[-5:][:3]]
        every = s.dense_search("docs", query.tolist(), 10, parse_filter({"rare": True}))
        assert ids(every) == [f"d:{int(i)}" for i in order[-5:]]  # fewer than k: all there are
        sparse = s.sparse_search("docs", "text", 10, parse_filter({"rare": True}))
        assert {h.chunk.id for h in sparse} == {f"d:{i}" for i in rare}
    finally:
        s.close()


# -- index types -----------------------------------------------------------------------


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors around a few centres, as embeddings of a few topics are."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((8, dim))
    x = centres[rng.integers(0, 8, n)] + 0.6 * rng.standard_normal((n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_index_types_find_the_true_neighbours(tmp_path: Path, index_type: str) -> None:
    vectors = clustered(600, 32, seed=1)
    queries = clustered(20, 32, seed=2)
    s = FaissStore(str(tmp_path / index_type), index_type=index_type, ivf_nlist=8, ivf_nprobe=4)
    try:
        s.create_collection("docs", 32)
        s.upsert("docs", [make_chunk("d", i, vector=v.tolist()) for i, v in enumerate(vectors)])
        found = 0
        for q in queries:
            truth = {f"d:{int(i)}" for i in np.argsort(-(vectors @ q))[:10]}
            hits = s.dense_search("docs", q.tolist(), 10, None)
            assert len(hits) == 10
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
            found += len(truth & set(ids(hits)))
            if index_type == "flat":
                assert set(ids(hits)) == truth
                assert hits[0].score == pytest.approx(float(np.max(vectors @ q)), abs=1e-5)
        assert found / (10 * len(queries)) >= 0.9
        index = s._collections["docs"].index
        expected = {"flat": faiss.IndexIDMap2, "hnsw": faiss.IndexIDMap2, "ivf": faiss.IndexIVFFlat}
        assert isinstance(index, expected[index_type])
    finally:
        s.close()


@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_deletes_and_replacements_on_every_index_type(tmp_path: Path, index_type: str) -> None:
    vectors = clustered(400, 16, seed=4)
    s = FaissStore(str(tmp_path / index_type), index_type=index_type, ivf_nlist=4)
    try:
        s.create_collection("docs", 16)
        s.upsert("docs", [make_chunk(f"doc{i % 40}", i, vector=v.tolist()) for i, v in
                          enumerate(vectors)])  # fmt: skip
        assert len(s.dense_search("docs", vectors[0].tolist(), 5, None)) == 5
        builds = s.index_builds
        s.delete_documents("docs", ["doc0"])  # chunks 0, 40, 80, ...
        # chunk 1 now points where chunk 0 was
        s.upsert("docs", [make_chunk("doc1", 1, vector=vectors[0].tolist())])
        if index_type == "hnsw":
            assert s.index_builds == builds  # marked dirty, not rebuilt yet
        hits = s.dense_search("docs", vectors[0].tolist(), 10, None)
        assert hits[0].chunk.id == "doc1:1" and hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert not any(h.chunk.document_id == "doc0" for h in hits)
        assert s.index_builds == builds + (1 if index_type == "hnsw" else 0)
        assert s.count("docs") == (390, 39)
        assert s._collections["docs"].index.ntotal == 390
    finally:
        s.close()


def test_ivf_is_flat_until_it_has_enough_vectors_to_train(tmp_path: Path) -> None:
    s = FaissStore(str(tmp_path / "ivf"), index_type="ivf", ivf_nlist=4)  # trains at 156
    try:
        s.create_collection("docs", 16)
        vectors = clustered(200, 16, seed=5)
        s.upsert("docs", [make_chunk("d", i, vector=v.tolist()) for i, v in
                          enumerate(vectors[:100])])  # fmt: skip
        s.dense_search("docs", vectors[0].tolist(), 1, None)
        assert isinstance(s._collections["docs"].index, faiss.IndexIDMap2)  # exact fallback
        s.upsert("docs", [make_chunk("d", i, vector=v.tolist()) for i, v in
                          enumerate(vectors) if i >= 100])  # fmt: skip
        assert s.dense_search("docs", vectors[150].tolist(), 1, None)[0].chunk.id == "d:150"
        index = s._collections["docs"].index
        assert isinstance(index, faiss.IndexIVFFlat) and index.is_trained
        assert index.ntotal == 200 and index.nprobe == 4
    finally:
        s.close()


# -- persistence -----------------------------------------------------------------------


def test_data_survives_reopening_in_this_and_a_new_process(
    docs: FaissStore, faiss_dir: str
) -> None:
    docs.close()
    assert index_files(faiss_dir) == ["index-flat-g1.faiss"]  # saved on close
    again = FaissStore(faiss_dir)
    try:
        assert again.count("docs") == (6, 3)
        assert again.get_collection("docs").description == "test docs"
        assert again.sparse_search("docs", "graphene", 1, None)[0].chunk.document_id == "a"
        assert again.dense_search("docs", unit(0, 0, 0, 1), 1, None)[0].chunk.id == "c:0"
        assert (again.index_loads, again.index_builds) == (1, 0)  # read, not rebuilt
    finally:
        again.close()
    result = run_in_new_process(
        "import json\n"
        "from services.retriever.backends.faiss import FaissStore\n"
        "from services.retriever.backends.base import ChunkRecord\n"
        f"s = FaissStore({faiss_dir!r})\n"
        "c = s.get_collection('docs')\n"
        "hits = s.dense_search('docs', [0.0, 0.0, 0.0, 1.0], 1, None)\n"
        "count = s.count('docs')\n"
        "s.upsert('docs', [ChunkRecord('n:0', 'n', 'written by another process', "
        "[1.0, 0.0, 0.0, 0.0], {}, 'n.txt', 0)])\n"
        "print(json.dumps({'count': count, 'description': c.description, "
        "'created_at': c.created_at, 'top': hits[0].chunk.id}))\n"
        "s.close()\n"
    )
    assert result["count"] == [6, 3]
    assert result["description"] == "test docs" and result["created_at"] > 0
    assert result["top"] == "c:0"
    back = FaissStore(faiss_dir)
    try:
        assert back.count("docs") == (7, 4)
        assert back.sparse_search("docs", "another process", 1, None)[0].chunk.id == "n:0"
    finally:
        back.close()


def test_one_process_per_directory(docs: FaissStore, faiss_dir: str) -> None:
    with pytest.raises(Unavailable, match="only one process") as err:
        FaissStore(faiss_dir)
    assert str(os.getpid()) in err.value.message
    result = run_in_new_process(
        "import json\n"
        "from services.retriever.backends.faiss import FaissStore\n"
        "from shared.errors import Unavailable\n"
        "try:\n"
        f"    FaissStore({faiss_dir!r})\n"
        "    print(json.dumps({'error': None}))\n"
        "except Unavailable as e:\n"
        "    print(json.dumps({'error': e.message}))\n"
    )
    assert result["error"] is not None and faiss_dir in result["error"]
    assert docs.count("docs") == (6, 3)  # the holder is unaffected


def test_index_file_is_written_after_writes_when_due(faiss_dir: str) -> None:
    s = FaissStore(faiss_dir, save_interval_s=0)
    try:
        s.create_collection("docs", DIM)
        s.upsert("docs", six_chunks()[:3])
        s.dense_search("docs", unit(1, 0, 0, 0), 1, None)  # builds, then saves
        s.upsert("docs", six_chunks()[3:])  # applied in place, saved again
        assert index_files(faiss_dir) == ["index-flat-g2.faiss"]  # older generations removed
        assert not [p for p in (Path(faiss_dir) / "docs").iterdir() if p.name.endswith(".tmp")]
    finally:
        s.close()


def test_changing_the_index_type_rebuilds(docs: FaissStore, faiss_dir: str) -> None:
    docs.close()
    hnsw = FaissStore(faiss_dir, index_type="hnsw")
    try:
        assert hnsw.dense_search("docs", unit(0, 0, 0, 1), 1, None)[0].chunk.id == "c:0"
        assert (hnsw.index_loads, hnsw.index_builds) == (0, 1)
    finally:
        hnsw.close()
    assert index_files(faiss_dir) == ["index-hnsw32-g1.faiss"]


# -- crash safety ----------------------------------------------------------------------


def crash_after_writes(faiss_dir: str) -> None:
    """Another process commits writes, searches (so its index is current in memory), and
    dies without closing: the index file on disk stays at the older generation (the long
    save interval keeps that process from writing it after its writes)."""
    run_in_new_process(
        "import json, os\n"
        "from services.retriever.backends.faiss import FaissStore\n"
        "from services.retriever.backends.base import ChunkRecord\n"
        f"s = FaissStore({faiss_dir!r}, save_interval_s=3600)\n"
        "s.upsert('docs', [ChunkRecord('n:0', 'n', 'nebula dust', [0.0, 0.0, 1.0, 1.0], "
        "{}, 'n.txt', 0)])\n"
        "s.delete_documents('docs', ['c'])\n"
        "s.dense_search('docs', [0.0, 0.0, 1.0, 1.0], 1, None)\n"
        "print(json.dumps({}), flush=True)\n"
        "os._exit(0)\n"
    )


def assert_state_after_crash(s: FaissStore) -> None:
    assert s.count("docs") == (6, 3)
    hits = s.dense_search("docs", unit(0, 0, 1, 1), 10, None)
    assert hits[0].chunk.id == "n:0" and "c:0" not in ids(hits)
    assert len(hits) == 6
    assert ids(s.sparse_search("docs", "nebula", 5, None)) == ["n:0"]
    assert s.sparse_search("docs", "quantum", 5, None) == []


def test_crash_between_database_commit_and_index_write(docs: FaissStore, faiss_dir: str) -> None:
    docs.close()
    assert index_files(faiss_dir) == ["index-flat-g1.faiss"]
    crash_after_writes(faiss_dir)
    assert index_files(faiss_dir) == ["index-flat-g1.faiss"]  # stale: the DB is at g3
    s = FaissStore(faiss_dir)
    try:
        assert_state_after_crash(s)
        assert (s.index_loads, s.index_builds) == (0, 1)
    finally:
        s.close()
    assert index_files(faiss_dir) == ["index-flat-g3.faiss"]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "stale_renamed", "missing", "temp"])
def test_damaged_or_missing_index_file_is_rebuilt(
    docs: FaissStore, faiss_dir: str, damage: str
) -> None:
    docs.close()
    crash_after_writes(faiss_dir)
    folder = Path(faiss_dir) / "docs"
    old = folder / "index-flat-g1.faiss"
    current = folder / "index-flat-g3.faiss"
    if damage == "garbage":
        current.write_bytes(b"not a faiss index" * 100)
    elif damage == "truncated":
        current.write_bytes(old.read_bytes()[: old.stat().st_size // 2])
    elif damage == "stale_renamed":
        old.rename(current)  # right name, wrong contents (6 vectors, one of them deleted)
    elif damage == "missing":
        old.unlink()
    else:  # a crash while writing the new file left its temporary behind
        (folder / ".index-flat-g3.faiss.0123.tmp").write_bytes(old.read_bytes()[:100])
    s = FaissStore(faiss_dir)
    try:
        assert_state_after_crash(s)
        assert s.index_builds == 1
    finally:
        s.close()
    assert sorted(p.name for p in folder.iterdir()) == ["chunks.sqlite", "index-flat-g3.faiss"]


def test_crash_while_creating_or_deleting_a_collection_leaves_nothing(faiss_dir: str) -> None:
    Path(faiss_dir).mkdir(parents=True)
    (Path(faiss_dir) / ".creating-half-0a1b").mkdir()
    (Path(faiss_dir) / ".creating-half-0a1b" / "chunks.sqlite").write_bytes(b"partial")
    (Path(faiss_dir) / ".deleting-gone-2c3d").mkdir()
    s = FaissStore(faiss_dir)
    try:
        assert s.list_collections() == []
        assert sorted(os.listdir(faiss_dir)) == ["LOCK"]
    finally:
        s.close()


def test_a_write_that_fails_leaves_nothing_behind(
    docs: FaissStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    coll = docs._collections["docs"]
    generation = coll.generation
    real = faiss_backend._set_info

    def full_disk(db: sqlite3.Connection, key: str, value: str) -> None:
        real(db, key, value)
        raise sqlite3.OperationalError("database or disk is full")

    # The rows are inserted, then the transaction fails: all of it is rolled back.
    monkeypatch.setattr(faiss_backend, "_set_info", full_disk)
    with pytest.raises(ResourceExhausted, match="no space left"):
        docs.upsert("docs", [make_chunk("new", 0), make_chunk("a", 0, "replaced")])
    with pytest.raises(ResourceExhausted):
        docs.delete_documents("docs", ["b"])
    monkeypatch.undo()
    assert coll.generation == generation and docs.count("docs") == (6, 3)
    assert docs.dense_search("docs", unit(1, 0, 0, 0), 1, None)[0].chunk.text == (
        "Graphene conducts electricity"
    )
    assert len(docs.dense_search("docs", unit(1, 1, 1, 1), 10, None)) == 6


# -- threads ---------------------------------------------------------------------------


@pytest.mark.parametrize("index_type", ["flat", "hnsw"])
def test_concurrent_writes_and_searches(tmp_path: Path, index_type: str) -> None:
    s = FaissStore(str(tmp_path / "c"), index_type=index_type)
    s.create_collection("docs", DIM)
    s.upsert("docs", six_chunks())
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for batch in range(5):
                doc = f"w{worker}_{batch}"
                s.upsert("docs", [make_chunk(doc, i, f"worker text {i}") for i in range(4)])
                s.delete_stale_chunks("docs", [doc], [f"{doc}:0", f"{doc}:1", f"{doc}:2"])
        except BaseException as exc:  # collected: a thread's exception would vanish
            errors.append(exc)

    def search() -> None:
        try:
            for _ in range(10):
                s.dense_search("docs", unit(1, 1, 1, 1), 5, parse_filter({"n": {"$gte": 1}}))
                s.sparse_search("docs", "worker text", 5, None)
                s.count("docs")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    threads += [threading.Thread(target=search) for _ in range(3)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert s.count("docs") == (6 + 3 * 5 * 3, 3 + 3 * 5)
        assert len(s.dense_search("docs", unit(1, 1, 1, 1), 100, None)) == 6 + 3 * 5 * 3
    finally:
        s.close()


# -- failures and options --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"directory": ""}, "directory is empty"),
        ({"index_type": "diskann"}, "unknown FAISS index type"),
        ({"use_gpu": "maybe"}, "use_gpu must be one of"),
        ({"hnsw_m": 1}, "hnsw_m must be at least 2"),
        ({"ivf_nlist": 0}, "ivf_nlist must be a positive integer"),
        ({"ivf_nlist": 64, "ivf_min_train": 10}, "ivf_min_train"),
        ({"bm25_b": 2.0}, "bm25_b must be between 0 and 1"),
        ({"save_interval_s": -1.0}, "save_interval_s"),
    ],
)
def test_bad_options(faiss_dir: str, kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=fragment):
        FaissStore(**{"directory": faiss_dir, **kwargs})


def test_gpu_always_without_a_gpu_refuses_to_start(faiss_dir: str) -> None:
    if faiss.get_num_gpus() > 0:
        pytest.skip("faiss sees a GPU here")
    with pytest.raises(FailedPrecondition, match="sees no GPU"):
        FaissStore(faiss_dir, use_gpu="always")
    s = FaissStore(faiss_dir, use_gpu="never")
    s.close()


def test_unwritable_directory_is_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(Unavailable, match="choose a writable RAGRAIL_RETRIEVER_FAISS_DIR"):
        FaissStore(str(blocker / "faiss"))


def test_closed_store_is_unavailable(faiss_dir: str) -> None:
    s = FaissStore(faiss_dir)
    s.create_collection("docs", DIM)
    s.close()
    s.close()  # idempotent
    with pytest.raises(Unavailable, match="closed"):
        s.list_collections()
    with pytest.raises(Unavailable, match="closed"):
        s.count("docs")
    FaissStore(faiss_dir).close()  # the lock was released


def test_analysis_is_configurable_and_pinned_per_collection(tmp_path: Path) -> None:
    directory = str(tmp_path / "plain")
    s = FaissStore(directory, analyzer=LexicalAnalyzer(""))
    try:
        assert s.describe()["analyzer"] == "words+lowercase+stop33+stem:none"
        s.create_collection("docs", DIM)
        s.upsert("docs", [make_chunk("a", 0, "folding cats")])
        assert s.sparse_search("docs", "fold", 5, None) == []  # no stemming
        assert ids(s.sparse_search("docs", "folding", 5, None)) == ["a:0"]
    finally:
        s.close()
    stemming = FaissStore(directory)
    try:
        assert stemming.get_collection("docs").name == "docs"  # still visible and deletable
        with pytest.raises(FailedPrecondition, match="re-create the collection"):
            stemming.sparse_search("docs", "folding", 5, None)
        with pytest.raises(FailedPrecondition):
            stemming.upsert("docs", [make_chunk("b", 0)])
    finally:
        stemming.close()


# -- parity with Milvus ----------------------------------------------------------------

# Words of a few topics, in several forms so stemming matters, plus stop words; sampled
# with Zipf-like weights into chunks of varied length, so BM25 scores rarely tie.
_TOPICS = {
    "astronomy": "star stars galaxy galaxies orbit orbiting planet planets telescope nebula "
    "comet comets gravity gravitational asteroid rover landing lander mars lunar solar",
    "baking": "bread dough sourdough yeast flour knead kneading oven crust starter rise "
    "rising ferment fermentation loaf loaves butter sugar salt proof proofing",
    "biology": "protein proteins fold folding folded cell cells gene genes enzyme dna "
    "mutation mutations neuron neurons tissue membrane receptor receptors virus bacteria",
    "computing": "network networks neural train training model models gradient tensor gpu "
    "cache caching compile compiler kernel thread threads memory latency index indexing",
    "geology": "glacier glaciers rock rocks erosion sediment volcano volcanic magma mineral "
    "minerals quake earthquake fault faults crust mantle basalt granite melting melt",
}
_STOP = ["the", "of", "and", "a", "to", "in", "is", "it", "that", "with", "for", "on", "by"]


def realistic_corpus(n: int, seed: int) -> list[tuple[str, str]]:
    """(topic, text) pairs: mostly one topic's words, some from others, some stop words."""
    rng = random.Random(seed)
    words = {t: w.split() for t, w in _TOPICS.items()}
    everything = [w for ws in words.values() for w in ws]
    out: list[tuple[str, str]] = []
    for _ in range(n):
        topic = rng.choice(sorted(words))
        own = words[topic]
        weights = [1 / (r + 1) for r in range(len(own))]
        text: list[str] = []
        for _ in range(rng.randint(12, 90)):
            roll = rng.random()
            if roll < 0.25:
                text.append(rng.choice(_STOP))
            elif roll < 0.85:
                text.append(rng.choices(own, weights)[0])
            else:
                text.append(rng.choice(everything))
        text[0] = text[0].capitalize()
        out.append((topic, " ".join(text) + "."))
    return out


def same_ranking(
    name: str, faiss_hits: list[ScoredChunk], milvus_hits: list[ScoredChunk], top: int = 10
) -> int:
    """Asserts the two top-`top` lists are the same ranking; returns how many positions
    differed only by the order of exactly tied scores. Both lists hold up to 3 x top hits,
    so a tie that straddles position `top` is seen whole."""
    assert len(faiss_hits) == len(milvus_hits), name
    reordered = 0
    for i in range(min(top, len(faiss_hits))):
        f, m = faiss_hits[i], milvus_hits[i]
        assert f.score == pytest.approx(m.score, rel=1e-5), (name, i, f.score, m.score)
        if f.chunk.id == m.chunk.id:
            continue
        # Ties are exact within one engine (same inputs, same arithmetic), and each engine
        # breaks them its own way: the ids may differ only inside a group of equal scores.
        f_group = {h.chunk.id for h in faiss_hits if math.isclose(h.score, f.score, rel_tol=1e-9)}
        m_group = {h.chunk.id for h in milvus_hits if math.isclose(h.score, m.score, rel_tol=1e-9)}
        assert len(f_group) > 1 and f_group == m_group, (name, i, f.chunk.id, m.chunk.id)
        reordered += 1
    return reordered


@pytest.fixture(scope="module")
def twin_stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FaissStore, Any]]:
    """The same 300 chunks (realistic text, 384-d unit vectors) in FAISS flat and in Milvus
    Lite with a FLAT index."""
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from services.retriever.backends.milvus import MilvusStore

    root = tmp_path_factory.mktemp("parity")
    corpus = realistic_corpus(300, seed=11)
    vectors = np.random.default_rng(11).standard_normal((300, 384))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks = [
        ChunkRecord(
            id=f"doc{i // 3}:{i % 3}",
            document_id=f"doc{i // 3}",
            text=text,
            vector=vectors[i].tolist(),
            metadata={"topic": topic, "n": i},
            document_name=f"doc{i // 3}.txt",
            chunk_index=i % 3,
        )
        for i, (topic, text) in enumerate(corpus)
    ]
    fs = FaissStore(str(root / "faiss"), index_type="flat")
    ms = MilvusStore(uri=str(root / "milvus.db"), index_type="FLAT")
    try:
        for s in (fs, ms):
            s.create_collection("twin", 384)
            s.upsert("twin", chunks)  # one batch: Milvus Lite keeps one segment, one IDF
        yield fs, ms
    finally:
        fs.close()
        ms.close()


def test_dense_top10_matches_milvus_flat(twin_stores: tuple[FaissStore, Any]) -> None:
    fs, ms = twin_stores
    rng = np.random.default_rng(5)
    stored = np.asarray([h.chunk.vector for h in fs.dense_search(
        "twin", [1.0] * 384, 300, None, include_vectors=True)])  # fmt: skip
    queries = list(rng.standard_normal((15, 384)))
    queries += [stored[i] + 0.5 * rng.standard_normal(384) / math.sqrt(384) for i in range(5)]
    for i, q in enumerate(queries):
        query = (q / np.linalg.norm(q)).tolist()
        f = fs.dense_search("twin", query, 30, None)
        m = ms.dense_search("twin", query, 30, None)
        assert same_ranking(f"dense query {i}", f, m) == 0  # random vectors: no ties
    flt = parse_filter({"topic": "geology", "n": {"$lt": 200}})
    f = fs.dense_search("twin", queries[0].tolist(), 30, flt)
    m = ms.dense_search("twin", queries[0].tolist(), 30, flt)
    assert same_ranking("filtered dense", f, m) == 0


def test_sparse_top10_matches_milvus_bm25(twin_stores: tuple[FaissStore, Any]) -> None:
    fs, ms = twin_stores
    rng = random.Random(9)
    all_words = [w for ws in _TOPICS.values() for w in ws.split()]
    queries = ["how does sourdough rise", "Mars rover landing", "neural network training",
               "glacier melting erosion", "protein folding folds", "the of and stars",
               "gravity gravity comet", "GPU kernel latency caching"]  # fmt: skip
    queries += [" ".join(rng.sample(all_words, rng.randint(1, 4))) for _ in range(24)]
    reordered = compared = 0
    for q in queries:
        f = fs.sparse_search("twin", q, 30, None)
        m = ms.sparse_search("twin", q, 30, None)
        assert f, q
        reordered += same_ranking(f"sparse {q!r}", f, m)
        compared += min(10, len(f))
    flt = parse_filter({"topic": {"$in": ["baking", "astronomy"]}})
    reordered += same_ranking(
        "filtered sparse",
        fs.sparse_search("twin", "rising star yeast", 30, flt),
        ms.sparse_search("twin", "rising star yeast", 30, flt),
    )
    # Ties exist (equal length, equal counts) but must stay rare, or the check says little.
    assert reordered <= compared // 10, (reordered, compared)
