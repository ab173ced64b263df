"""The VectorStore contract, run against every backend (the `backend` fixture of conftest.py):
MilvusStore on a Milvus Lite file and FaissStore on a directory, both under tmp_path. What
only one backend does (its options, index types, files, crash safety, server handling) is
tested in test_milvus_backend.py and test_faiss_backend.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from services.retriever.analysis import LexicalAnalyzer
from services.retriever.backends import BACKENDS, load_backend
from services.retriever.backends.base import ChunkRecord, VectorStore
from services.retriever.filters import matches, parse_filter
from services.retriever.settings import RetrieverSettings
from shared.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unavailable,
)
from tests.retriever.stores import (
    BACKEND_NAMES,
    DIM,
    NEEDS,
    concurrent_writes_and_searches,
    ids,
    make_chunk,
    open_store,
    run_in_new_process,
    unit,
)

# -- registry ---------------------------------------------------------------------------


def test_registry_builds_each_backend_from_settings(backend: str, tmp_path: Path) -> None:
    for module in NEEDS[backend]:
        pytest.importorskip(module)
    assert set(BACKENDS) == {"milvus", "faiss"}
    if backend == "milvus":  # the default backend
        settings = RetrieverSettings(milvus_uri=str(tmp_path / "m.db"), milvus_index_type="FLAT")
        expected = {"index_type": "FLAT"}
    else:
        settings = RetrieverSettings(
            backend="faiss",
            faiss_dir=str(tmp_path / "f"),
            faiss_index="hnsw",
            faiss_use_gpu="never",
            bm25_language="",
        )
        expected = {
            "index_type": "hnsw",
            "gpu": "no",
            "analyzer": "words+lowercase+stop33+stem:none",
            "directory": str(tmp_path / "f"),
        }
    s = load_backend(settings)
    try:
        assert isinstance(s, VectorStore) and s.name == backend
        assert type(s).__module__ == f"services.retriever.backends.{backend}"
        facts = s.describe()
        assert {key: facts[key] for key in expected} == expected
    finally:
        s.close()


def test_registry_rejects_unknown_backend() -> None:
    with pytest.raises(ValueError, match="backend"):
        RetrieverSettings(backend="chroma")
    # Settings validate the name; load_backend still answers a bypassed one clearly.
    bypassed = RetrieverSettings.model_construct(backend="chroma")
    with pytest.raises(
        InvalidArgument, match=r"unknown retriever backend 'chroma'.*\['faiss', 'milvus'\]"
    ):
        load_backend(bypassed)


# -- collections ------------------------------------------------------------------------


def test_creates_parent_directories_and_describes_itself(
    backend: str, store: VectorStore, location: str
) -> None:
    assert Path(location).parent.is_dir()
    facts = store.describe()
    if backend == "milvus":
        expected = {"uri": location, "mode": "milvus-lite", "index_type": "AUTOINDEX"}
    else:
        import faiss

        gpu = "yes" if faiss.get_num_gpus() > 0 else "no"  # use_gpu "auto"
        expected = {"directory": location, "index_type": "flat", "gpu": gpu}
    assert {key: facts[key] for key in expected} == expected
    assert facts["analyzer"] == "words+lowercase+stop33+stem:english"
    assert all(isinstance(v, str) for v in facts.values())


def test_collection_lifecycle(store: VectorStore) -> None:
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
    store.upsert("papers", [make_chunk("a", 0)])
    store.delete_collection("papers")
    assert [c.name for c in store.list_collections()] == ["abstracts"]
    with pytest.raises(NotFound):
        store.get_collection("papers")
    store.create_collection("papers", DIM)  # the name is free again, and the data gone
    assert store.count("papers") == (0, 0)


@pytest.mark.parametrize("name", ["", "Papers", "1papers", "pa-pers", "p" * 65, "papers\n", ".."])
def test_invalid_collection_names(store: VectorStore, name: str) -> None:
    with pytest.raises(InvalidArgument, match="lowercase letters"):
        store.create_collection(name, DIM)
    with pytest.raises(InvalidArgument, match="lowercase letters"):
        store.count(name)


@pytest.mark.parametrize("dimension", [0, -1, 40_000])
def test_invalid_dimension(store: VectorStore, dimension: int) -> None:
    with pytest.raises(InvalidArgument, match="dimension must be between"):
        store.create_collection("papers", dimension)


def test_every_method_reports_a_missing_collection(store: VectorStore) -> None:
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


# -- writing ----------------------------------------------------------------------------


def test_counts_are_exact(docs: VectorStore) -> None:
    assert docs.count("docs") == (6, 3)
    docs.upsert("docs", [make_chunk("d", 0), make_chunk("d", 1)])
    assert docs.count("docs") == (8, 4)
    docs.delete_documents("docs", ["a"])
    assert docs.count("docs") == (6, 3)


def test_upsert_replaces_by_id(docs: VectorStore) -> None:
    replacement = make_chunk("a", 0, "Superconductors at room temperature", unit(0, 0, 1, 1),
                             {"year": 2024})  # fmt: skip
    assert docs.upsert("docs", [replacement]) == 1
    docs.upsert("docs", [replacement])
    assert docs.count("docs") == (6, 3)
    # The sparse side was re-derived: old words are gone, new ones found.
    assert "a:0" not in ids(docs.sparse_search("docs", "conducts", 5, None))
    hits = docs.sparse_search("docs", "superconductors", 5, None)
    assert ids(hits) == ["a:0"]
    assert hits[0].chunk.metadata == {"year": 2024}  # replaced, not merged
    # The old vector is gone from the dense index too.
    dense = docs.dense_search("docs", unit(0, 0, 1, 1), 1, None)
    assert ids(dense) == ["a:0"] and dense[0].score == pytest.approx(1.0, abs=1e-5)


def test_duplicate_ids_in_one_batch_keep_the_last(docs: VectorStore) -> None:
    first = make_chunk("e", 0, "first version")
    last = make_chunk("e", 0, "last version")
    assert docs.upsert("docs", [first, last]) == 1
    assert [h.chunk.text for h in docs.sparse_search("docs", "version", 5, None)] == [
        "last version"
    ]


def test_empty_upsert_still_checks_the_collection(docs: VectorStore) -> None:
    assert docs.upsert("docs", []) == 0
    with pytest.raises(NotFound):
        docs.upsert("nope", [])


_BAD_CHUNKS_EVERYWHERE = [
    (make_chunk("x", 0, vector=[1.0, 0.0]), "2-dimensional vector but collection 'docs' stores 4"),
    (make_chunk("x", 0, vector=[]), "0-dimensional"),
    (make_chunk("x", 0, vector=[1.0, math.nan, 0.0, 0.0]), "NaN or infinity"),
    (make_chunk("x", 0, chunk_id=""), "id is empty"),
    (make_chunk("x", 0, metadata={"bad": {1, 2}}), "metadata is not plain JSON"),
    (make_chunk("x", 0, metadata={"nan": math.nan}), "metadata is not plain JSON"),
    (ChunkRecord("x:0", "x", "t", unit(1, 0, 0, 0), {}, "x", -1), "chunk_index"),
    (make_chunk("x", 0, chunk_id="bad\ud800"), "not valid Unicode"),
]
_BAD_CHUNKS_OF = {
    # Milvus stores VARCHARs of limited byte length.
    "milvus": [
        (make_chunk("x", 0, chunk_id="é" * 1100), "id is 2200 bytes"),
        (make_chunk("x", 0, text="x" * 70_000), "text is 70000 bytes"),
    ],
    # FAISS normalises vectors itself and keeps text in SQLite.
    "faiss": [
        (make_chunk("x", 0, vector=[0.0, 0.0, 0.0, 0.0]), "all zeros"),
    ],
}


@pytest.mark.parametrize(
    ("backend", "chunk", "fragment"),
    [
        pytest.param(backend, chunk, fragment, id=f"{backend}-{n}")
        for backend in BACKEND_NAMES
        for n, (chunk, fragment) in enumerate(_BAD_CHUNKS_EVERYWHERE + _BAD_CHUNKS_OF[backend])
    ],
)
def test_upsert_rejects_bad_chunks(docs: VectorStore, chunk: ChunkRecord, fragment: str) -> None:
    with pytest.raises(InvalidArgument, match="chunk '") as err:
        docs.upsert("docs", [make_chunk("ok", 0), chunk])
    assert fragment in err.value.message
    assert docs.count("docs") == (6, 3)  # nothing of the batch was written


def test_scores_are_cosine_whatever_the_vector_lengths(backend: str, docs: VectorStore) -> None:
    docs.upsert("docs", [make_chunk("n", 0, vector=[3.0, 0.0, 4.0, 0.0])])
    hits = docs.dense_search("docs", [6.0, 0.0, 8.0, 0.0], 2, None, include_vectors=True)
    assert ids(hits) == ["n:0", "b:2"]
    # FAISS stores vectors normalised (inner product index); Milvus stores them as given.
    stored = [0.6, 0.0, 0.8, 0.0] if backend == "faiss" else [3.0, 0.0, 4.0, 0.0]
    assert hits[0].chunk.vector == pytest.approx(stored)
    assert [h.score for h in hits] == pytest.approx([1.0, 0.8], abs=1e-6)


def test_delete_documents_counts_chunks(docs: VectorStore) -> None:
    assert docs.delete_documents("docs", ["b", "missing", "b"]) == 3
    assert docs.delete_documents("docs", ["b"]) == 0
    assert docs.delete_documents("docs", []) == 0
    assert {h.chunk.document_id for h in docs.dense_search("docs", unit(1, 1, 1, 1), 10, None)} == {
        "a",
        "c",
    }


def test_delete_stale_chunks(docs: VectorStore) -> None:
    # Document b was re-chunked into two chunks; a is untouched because it is not named.
    deleted = docs.delete_stale_chunks("docs", ["b"], ["b:0", "b:1", "a:0"])
    assert deleted == 1
    assert docs.count("docs") == (5, 3)
    assert docs.delete_stale_chunks("docs", ["b"], ["b:0", "b:1"]) == 0
    assert docs.delete_stale_chunks("docs", ["a", "c"], []) == 3
    assert docs.count("docs") == (2, 1)
    assert set(ids(docs.dense_search("docs", unit(1, 1, 1, 1), 10, None))) == {"b:0", "b:1"}


def test_ids_with_quotes_and_backslashes(docs: VectorStore) -> None:
    doc = "we\"ird\\doc's"
    docs.upsert("docs", [make_chunk(doc, 0), make_chunk(doc, 1)])
    page, _ = docs.list_documents("docs", 10, 0)
    assert next(d for d in page if d.id == doc).num_chunks == 2
    assert docs.delete_stale_chunks("docs", [doc], [f"{doc}:0"]) == 1
    assert docs.delete_documents("docs", [doc]) == 1
    assert docs.count("docs") == (6, 3)


# -- listing documents ------------------------------------------------------------------


def test_list_documents_pages_sorted_by_id(docs: VectorStore) -> None:
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


def test_list_documents_of_an_empty_collection(store: VectorStore) -> None:
    store.create_collection("empty", DIM)
    assert store.list_documents("empty", 10, 0) == ([], 0)
    assert store.count("empty") == (0, 0)
    assert store.dense_search("empty", unit(1, 0, 0, 0), 5, None) == []
    assert store.sparse_search("empty", "graphene", 5, None) == []


# -- search -----------------------------------------------------------------------------


def test_dense_search_scores_are_cosine_similarities(docs: VectorStore) -> None:
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


def test_dense_search_can_return_vectors(docs: VectorStore) -> None:
    hit = docs.dense_search("docs", unit(0, 0, 0, 1), 1, None, include_vectors=True)[0]
    assert hit.chunk.id == "c:0"
    assert hit.chunk.vector == pytest.approx(unit(0, 0, 0, 1))


def test_dense_search_checks_the_query(docs: VectorStore) -> None:
    with pytest.raises(InvalidArgument, match="3 dimensions but collection 'docs' stores 4"):
        docs.dense_search("docs", [1.0, 0.0, 0.0], 3, None)
    with pytest.raises(InvalidArgument, match="NaN or infinity"):
        docs.dense_search("docs", [1.0, math.inf, 0.0, 0.0], 3, None)
    with pytest.raises(InvalidArgument, match="k must be between"):
        docs.dense_search("docs", unit(1, 0, 0, 0), 0, None)


def test_k_larger_than_the_collection(docs: VectorStore) -> None:
    assert len(docs.dense_search("docs", unit(1, 1, 1, 1), 1000, None)) == 6
    assert set(ids(docs.sparse_search("docs", "graphene folding", 1000, None))) == {
        "a:0",
        "a:1",
        "b:0",
        "b:2",
    }


def test_sparse_search_is_bm25_best_first(docs: VectorStore) -> None:
    hits = docs.sparse_search("docs", "neural networks folding", 10, None)
    found = ids(hits)
    assert found[:2] == ["b:0", "b:1"] or found[:2] == ["b:1", "b:0"]
    assert set(found) == {"b:0", "b:1", "b:2"}
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert docs.sparse_search("docs", "GRAPHENE", 1, None)[0].chunk.document_id == "a"


def test_sparse_search_ignores_stop_words_and_blank_queries(docs: VectorStore) -> None:
    assert docs.sparse_search("docs", "the", 5, None) == []  # stop word, indexed nowhere
    assert docs.sparse_search("docs", "   ", 5, None) == []
    assert docs.sparse_search("docs", "unheardofword", 5, None) == []


def test_bm25_matches_word_forms(docs: VectorStore) -> None:
    # Stemming is ours (analysis.py), so it works on Milvus Lite, which skips stemmer filters.
    assert {h.chunk.id for h in docs.sparse_search("docs", "fold", 5, None)} == {"b:0", "b:2"}
    assert {h.chunk.id for h in docs.sparse_search("docs", "folds", 5, None)} == {"b:0", "b:2"}


def test_searches_see_writes_at_once(docs: VectorStore) -> None:
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
        ({"open": {"$ne": True}}, set()),  # only b:0 has the key
        ({"document_id": {"$in": ["a", "c"]}}, {"a:0", "a:1", "c:0"}),
        ({"document_id": {"$nin": ["a", "c"]}}, {"b:0", "b:1", "b:2"}),
        ({"document_name": "c.pdf"}, {"c:0"}),
        ({"tag": "physics", "year": {"$lt": 2020}}, {"a:0", "a:1"}),
        ({"tag": 'physics" or metadata["tag"] != "'}, set()),  # injection attempt
        ({"tag": "missing\\"}, set()),
    ],
)
def test_filters_in_both_searches_agree_with_matches(
    docs: VectorStore, flt: dict[str, Any], expected: set[str]
) -> None:
    parsed = parse_filter(flt)
    dense = docs.dense_search("docs", unit(1, 1, 1, 1), 10, parsed, include_vectors=True)
    assert {h.chunk.id for h in dense} == expected
    assert all(matches(parsed, h.chunk) for h in dense)
    sparse = docs.sparse_search("docs", "graphene neural folding quantum the", 10, parsed)
    assert {h.chunk.id for h in sparse} <= expected
    # The Python predicate (for in-process backends) decides every chunk the same way.
    everything = docs.dense_search("docs", unit(1, 1, 1, 1), 10, None, include_vectors=True)
    assert {h.chunk.id for h in everything if matches(parsed, h.chunk)} == expected


def test_escaped_values_match_exactly(docs: VectorStore) -> None:
    tricky = 'say "hi" \\ back\\"slash\nnew'
    docs.upsert("docs", [make_chunk("q", 0, "quoted", metadata={"quote": tricky})])
    hits = docs.dense_search("docs", unit(1, 1, 1, 1), 10, parse_filter({"quote": tricky}))
    assert ids(hits) == ["q:0"]
    assert hits[0].chunk.metadata == {"quote": tricky}


# -- persistence, processes, threads ----------------------------------------------------


def test_data_survives_reopening_in_this_and_a_new_process(
    backend: str, docs: VectorStore, location: str
) -> None:
    docs.close()
    again = open_store(backend, location)
    try:
        assert again.open_all() == ["docs"]  # what the service does before it serves
        assert again.count("docs") == (6, 3)
        assert again.get_collection("docs").description == "test docs"
        assert again.sparse_search("docs", "graphene", 1, None)[0].chunk.document_id == "a"
        assert again.dense_search("docs", unit(0, 0, 0, 1), 1, None)[0].chunk.id == "c:0"
    finally:
        again.close()
    result = run_in_new_process(
        "import json\n"
        "from services.retriever.backends.base import ChunkRecord\n"
        "from tests.retriever.stores import open_store\n"
        f"s = open_store({backend!r}, {location!r})\n"
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
    back = open_store(backend, location)
    try:
        assert back.count("docs") == (7, 4)
        assert back.sparse_search("docs", "another process", 1, None)[0].chunk.id == "n:0"
    finally:
        back.close()


def test_a_second_process_gets_unavailable_while_the_store_is_open(
    backend: str, docs: VectorStore, location: str
) -> None:
    result = run_in_new_process(
        "import json, logging\n"
        "logging.disable(logging.CRITICAL)\n"
        "from shared.errors import Unavailable\n"
        "from tests.retriever.stores import open_store\n"
        "try:\n"
        f"    open_store({backend!r}, {location!r})\n"
        "    print(json.dumps({'error': None}))\n"
        "except Unavailable as e:\n"
        "    print(json.dumps({'error': e.message}))\n"
    )
    assert result["error"] is not None and location in result["error"]
    assert "only one process" in result["error"]
    assert docs.count("docs") == (6, 3)  # the holder is unaffected


def test_concurrent_writes_and_searches(docs: VectorStore) -> None:
    concurrent_writes_and_searches(docs)


# -- failures and options ---------------------------------------------------------------


_BAD_OPTIONS = {
    "milvus": [
        ({"index_type": "DISKANN"}, "unknown Milvus index type"),
        ({"collection_prefix": "bad-prefix"}, "collection prefix"),
        ({"timeout_s": 0}, "timeout must be positive"),
    ],
    "faiss": [
        ({"index_type": "diskann"}, "unknown FAISS index type"),
        ({"use_gpu": "maybe"}, "use_gpu must be one of"),
        ({"hnsw_m": 1}, "hnsw_m must be at least 2"),
        ({"ivf_nlist": 0}, "ivf_nlist must be a positive integer"),
        ({"ivf_nlist": 64, "ivf_min_train": 10}, "ivf_min_train"),
        ({"bm25_b": 2.0}, "bm25_b must be between 0 and 1"),
        ({"save_interval_s": -1.0}, "save_interval_s"),
    ],
}


@pytest.mark.parametrize(
    ("backend", "options", "fragment"),
    [
        pytest.param(backend, options, fragment, id=f"{backend}-{n}")
        for backend in BACKEND_NAMES
        for n, (options, fragment) in enumerate(_BAD_OPTIONS[backend])
    ],
)
def test_bad_options(backend: str, location: str, options: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=fragment):
        open_store(backend, location, **options)


def test_empty_location(backend: str, location: str) -> None:
    # `location` only for its skip when the backend's packages are missing.
    fragment = "uri is empty" if backend == "milvus" else "directory is empty"
    with pytest.raises(InvalidArgument, match=fragment):
        open_store(backend, "")


def test_closed_store_is_unavailable(backend: str, location: str) -> None:
    s = open_store(backend, location)
    s.create_collection("docs", DIM)
    s.close()
    s.close()  # idempotent
    with pytest.raises(Unavailable, match="closed"):
        s.list_collections()
    with pytest.raises(Unavailable, match="closed"):
        s.count("docs")
    open_store(backend, location).close()  # the location was released


def test_analysis_is_configurable_and_pinned_per_collection(backend: str, location: str) -> None:
    s = open_store(backend, location, analyzer=LexicalAnalyzer(""))
    try:
        assert s.describe()["analyzer"] == "words+lowercase+stop33+stem:none"
        s.create_collection("docs", DIM)
        s.upsert("docs", [make_chunk("a", 0, "folding cats")])
        assert s.sparse_search("docs", "fold", 5, None) == []  # no stemming
        assert ids(s.sparse_search("docs", "folding", 5, None)) == ["a:0"]
    finally:
        s.close()
    stemming = open_store(backend, location)
    try:
        assert stemming.get_collection("docs").name == "docs"  # still visible and deletable
        with pytest.raises(FailedPrecondition, match="re-create the collection"):
            stemming.sparse_search("docs", "folding", 5, None)
        with pytest.raises(FailedPrecondition):
            stemming.upsert("docs", [make_chunk("b", 0)])
    finally:
        stemming.close()


# -- membership on list-valued metadata (document access lists) ------------------------


def _access_chunks() -> list[ChunkRecord]:
    groups: list[Any] = [["team-a"], ["team-b"], ["team-a", "team-b"], [], "team-a", None]
    chunks = [
        make_chunk(f"g{i}", 0, f"access test {i}", unit(1, 1, 1, i + 1), {"access_groups": g})
        for i, g in enumerate(groups)
    ]
    chunks.append(make_chunk("open", 0, "access test open", unit(1, 1, 1, 0), {"year": 1}))
    return chunks


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"access_groups": {"$any": ["team-a"]}}, {"g0:0", "g2:0"}),
        ({"access_groups": {"$any": ["team-b", "x"]}}, {"g1:0", "g2:0"}),
        # No access list (missing or null) passes; [] and a scalar where a list belongs do not.
        ({"access_groups": {"$unset_or_any": ["team-a"]}}, {"g0:0", "g2:0", "g5:0", "open:0"}),
        ({"access_groups": {"$unset_or_any": ["nobody"]}}, {"g5:0", "open:0"}),
        # A mandatory filter ANDed with a caller's: the caller cannot widen it.
        (
            {
                "$and": [
                    {"document_id": {"$nin": ["zzz"]}},
                    {"access_groups": {"$unset_or_any": ["team-b"]}},
                ]
            },
            {"g1:0", "g2:0", "g5:0", "open:0"},
        ),
        (
            {"$and": [{"document_id": "g0"}, {"access_groups": {"$unset_or_any": ["team-b"]}}]},
            set(),
        ),
    ],
)
def test_membership_filters_agree_on_every_backend(
    store: VectorStore, flt: dict[str, Any], expected: set[str]
) -> None:
    store.create_collection("acl", DIM)
    store.upsert("acl", _access_chunks())
    parsed = parse_filter(flt)
    dense = store.dense_search("acl", unit(1, 1, 1, 1), 20, parsed)
    assert set(ids(dense)) == expected
    sparse = store.sparse_search("acl", "access test", 20, parsed)
    assert set(ids(sparse)) == expected
    everything = store.dense_search("acl", unit(1, 1, 1, 1), 20, None)
    assert {h.chunk.id for h in everything if matches(parsed, h.chunk)} == expected
    # Top-k is taken among the chunks that pass, not cut before the filter.
    assert len(store.dense_search("acl", unit(1, 1, 1, 7), 2, parsed)) == min(2, len(expected))


def test_access_list_members_of_other_kinds_and_order(store: VectorStore) -> None:
    """Members that are not strings are never a group; a group found in any position counts
    (Milvus keeps each position in a column of its own)."""
    store.create_collection("acl", DIM)
    groups: list[Any] = [[1, "team-b"], [True], ["x"] * 7 + ["team-a"], ["team-a", None]]
    store.upsert(
        "acl",
        [
            make_chunk(f"m{i}", 0, f"mixed {i}", unit(1, 1, 1, i + 1), {"access_groups": g})
            for i, g in enumerate(groups)
        ],
    )
    for flt, expected in (
        ({"access_groups": {"$unset_or_any": ["team-a"]}}, {"m2:0", "m3:0"}),
        ({"access_groups": {"$any": ["team-b"]}}, {"m0:0"}),
        ({"access_groups": {"$unset_or_any": [""]}}, set()),
    ):
        parsed = parse_filter(flt)
        assert set(ids(store.dense_search("acl", unit(1, 1, 1, 1), 10, parsed))) == expected
        assert set(ids(store.sparse_search("acl", "mixed", 10, parsed))) == expected


def test_access_list_of_more_than_eight_groups_is_refused(store: VectorStore) -> None:
    store.create_collection("acl", DIM)
    nine = {"access_groups": [f"g{i}" for i in range(9)]}
    with pytest.raises(InvalidArgument, match="lists 9 groups; a document may name at most 8"):
        store.upsert("acl", [make_chunk("a", 0, metadata=nine)])
    store.upsert("acl", [make_chunk("a", 0, metadata={"access_groups": nine["access_groups"][:8]})])
    assert store.count("acl") == (1, 1)
