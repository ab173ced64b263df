"""MilvusStore against Milvus Lite files under tmp_path."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from services.retriever.analysis import LexicalAnalyzer
from services.retriever.backends import BACKENDS, load_backend
from services.retriever.backends.base import ChunkRecord, VectorStore
from services.retriever.backends.milvus import MilvusStore
from services.retriever.filters import matches, parse_filter
from services.retriever.settings import RetrieverSettings
from shared.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unavailable,
)

REPO = Path(__file__).resolve().parents[2]
DIM = 4


def unit(*xs: float) -> list[float]:
    norm = math.sqrt(sum(x * x for x in xs))
    return [x / norm for x in xs]


def make_chunk(
    doc: str,
    index: int,
    text: str = "",
    vector: list[float] | None = None,
    metadata: dict[str, Any] | None = None,
    chunk_id: str | None = None,
) -> ChunkRecord:
    return ChunkRecord(
        id=f"{doc}:{index}" if chunk_id is None else chunk_id,
        document_id=doc,
        text=text or f"chunk {index} of {doc}",
        vector=vector if vector is not None else unit(1, index + 1, 0.5, 0.25),
        metadata=metadata if metadata is not None else {"n": index},
        document_name=f"{doc}.pdf",
        chunk_index=index,
    )


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "milvus" / "test.db")


@pytest.fixture
def store(db_path: str) -> Iterator[MilvusStore]:
    s = MilvusStore(uri=db_path)
    yield s
    s.close()


@pytest.fixture
def docs(store: MilvusStore) -> MilvusStore:
    """A collection 'docs' with three documents of 2, 3 and 1 chunks."""
    store.create_collection("docs", DIM, "test docs")
    store.upsert(
        "docs",
        [
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
        ],
    )  # fmt: skip
    return store


def run_in_new_process(code: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- registry --------------------------------------------------------------------------


def test_registry_loads_milvus(db_path: str) -> None:
    assert set(BACKENDS) == {"milvus", "faiss"}
    s = load_backend(RetrieverSettings(milvus_uri=db_path))
    try:
        assert isinstance(s, VectorStore) and s.name == "milvus"
    finally:
        s.close()


def test_registry_rejects_unknown_backend() -> None:
    with pytest.raises(
        InvalidArgument, match=r"unknown retriever backend 'chroma'.*\['faiss', 'milvus'\]"
    ):
        load_backend(RetrieverSettings.model_construct(backend="chroma"))


# -- collections -----------------------------------------------------------------------


def test_creates_parent_directories_and_describes_itself(store: MilvusStore, db_path: str) -> None:
    assert Path(db_path).parent.is_dir()
    facts = store.describe()
    assert facts["uri"] == db_path and facts["mode"] == "milvus-lite"
    assert facts["index_type"] == "AUTOINDEX"
    assert facts["analyzer"] == "words+lowercase+stop33+stem:english"
    assert all(isinstance(v, str) for v in facts.values())


def test_collection_lifecycle(store: MilvusStore) -> None:
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
    with pytest.raises(NotFound):
        store.get_collection("papers")


@pytest.mark.parametrize("name", ["", "Papers", "1papers", "pa-pers", "p" * 65, "papers\n"])
def test_invalid_collection_names(store: MilvusStore, name: str) -> None:
    with pytest.raises(InvalidArgument, match="lowercase letters"):
        store.create_collection(name, DIM)


@pytest.mark.parametrize("dimension", [0, -1, 40_000])
def test_invalid_dimension(store: MilvusStore, dimension: int) -> None:
    with pytest.raises(InvalidArgument, match="dimension must be between"):
        store.create_collection("papers", dimension)


def test_every_method_reports_a_missing_collection(store: MilvusStore) -> None:
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


def test_collection_deleted_behind_the_cache_is_not_found(docs: MilvusStore) -> None:
    docs.count("docs")  # remembered as open
    docs._client.drop_collection("ragrail_docs")
    with pytest.raises(NotFound):
        docs.dense_search("docs", unit(1, 0, 0, 0), 3, None)


def test_collections_of_other_prefixes_are_invisible(db_path: str, store: MilvusStore) -> None:
    store.create_collection("mine", DIM)
    other = MilvusStore(uri=db_path, collection_prefix="other_")
    try:
        other.create_collection("theirs", DIM)
        assert [c.name for c in store.list_collections()] == ["mine"]
        assert [c.name for c in other.list_collections()] == ["theirs"]
        with pytest.raises(NotFound):
            store.get_collection("theirs")
    finally:
        other.close()


# -- writing ---------------------------------------------------------------------------


def test_counts_are_exact(docs: MilvusStore) -> None:
    assert docs.count("docs") == (6, 3)
    docs.upsert("docs", [make_chunk("d", 0), make_chunk("d", 1)])
    assert docs.count("docs") == (8, 4)
    docs.delete_documents("docs", ["a"])
    assert docs.count("docs") == (6, 3)


def test_upsert_replaces_by_id(docs: MilvusStore) -> None:
    replacement = make_chunk("a", 0, "Superconductors at room temperature", unit(0, 0, 1, 1),
                             {"year": 2024})  # fmt: skip
    assert docs.upsert("docs", [replacement]) == 1
    docs.upsert("docs", [replacement])
    assert docs.count("docs") == (6, 3)
    # The BM25 function re-derived the sparse vector: old words are gone, new ones found.
    assert "a:0" not in [h.chunk.id for h in docs.sparse_search("docs", "conducts", 5, None)]
    hits = docs.sparse_search("docs", "superconductors", 5, None)
    assert [h.chunk.id for h in hits] == ["a:0"]
    assert hits[0].chunk.metadata == {"year": 2024}  # replaced, not merged


def test_duplicate_ids_in_one_batch_keep_the_last(docs: MilvusStore) -> None:
    first = make_chunk("e", 0, "first version")
    last = make_chunk("e", 0, "last version")
    assert docs.upsert("docs", [first, last]) == 1
    assert [h.chunk.text for h in docs.sparse_search("docs", "version", 5, None)] == [
        "last version"
    ]


def test_empty_upsert_still_checks_the_collection(docs: MilvusStore) -> None:
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
        (make_chunk("x", 0, chunk_id=""), "id is empty"),
        (make_chunk("x", 0, chunk_id="é" * 1100), "id is 2200 bytes"),
        (make_chunk("x", 0, text="x" * 70_000), "text is 70000 bytes"),
        (make_chunk("x", 0, metadata={"bad": {1, 2}}), "metadata is not plain JSON"),
        (make_chunk("x", 0, metadata={"nan": math.nan}), "metadata is not plain JSON"),
    ],
)
def test_upsert_rejects_bad_chunks(docs: MilvusStore, chunk: ChunkRecord, fragment: str) -> None:
    with pytest.raises(InvalidArgument, match="chunk '") as err:
        docs.upsert("docs", [make_chunk("ok", 0), chunk])
    assert fragment in err.value.message
    assert docs.count("docs") == (6, 3)  # nothing of the batch was written


def test_delete_documents_counts_chunks(docs: MilvusStore) -> None:
    assert docs.delete_documents("docs", ["b", "missing", "b"]) == 3
    assert docs.delete_documents("docs", ["b"]) == 0
    assert docs.delete_documents("docs", []) == 0
    assert {h.chunk.document_id for h in docs.dense_search("docs", unit(1, 1, 1, 1), 10, None)} == {
        "a",
        "c",
    }


def test_delete_stale_chunks(docs: MilvusStore) -> None:
    # Document b was re-chunked into two chunks; a is untouched because it is not named.
    deleted = docs.delete_stale_chunks("docs", ["b"], ["b:0", "b:1", "a:0"])
    assert deleted == 1
    assert docs.count("docs") == (5, 3)
    assert docs.delete_stale_chunks("docs", ["b"], ["b:0", "b:1"]) == 0
    assert docs.delete_stale_chunks("docs", ["a", "c"], []) == 3
    assert docs.count("docs") == (2, 1)


def test_ids_with_quotes_and_backslashes(docs: MilvusStore) -> None:
    doc = "we\"ird\\doc's"
    docs.upsert("docs", [make_chunk(doc, 0), make_chunk(doc, 1)])
    page, _ = docs.list_documents("docs", 10, 0)
    assert next(d for d in page if d.id == doc).num_chunks == 2
    assert docs.delete_stale_chunks("docs", [doc], [f"{doc}:0"]) == 1
    assert docs.delete_documents("docs", [doc]) == 1
    assert docs.count("docs") == (6, 3)


# -- listing documents -----------------------------------------------------------------


def test_list_documents_pages_sorted_by_id(docs: MilvusStore) -> None:
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


def test_list_documents_of_an_empty_collection(store: MilvusStore) -> None:
    store.create_collection("empty", DIM)
    assert store.list_documents("empty", 10, 0) == ([], 0)
    assert store.count("empty") == (0, 0)


# -- search ----------------------------------------------------------------------------


def test_dense_search_scores_are_cosine_similarities(docs: MilvusStore) -> None:
    query = unit(1, 0.2, 0, 0)
    hits = docs.dense_search("docs", query, 3, None)
    assert [h.chunk.id for h in hits] == ["a:0", "a:1", "b:0"]
    expected = sum(q * v for q, v in zip(query, unit(1, 0, 0, 0), strict=True))
    assert hits[0].score == pytest.approx(expected, abs=1e-5)
    assert hits[0].score >= hits[1].score >= hits[2].score
    first = hits[0].chunk
    assert (first.document_id, first.document_name, first.chunk_index) == ("a", "a.pdf", 0)
    assert first.text == "Graphene conducts electricity"
    assert first.metadata == {"year": 2019, "tag": "physics"}
    assert first.vector == []


def test_dense_search_can_return_vectors(docs: MilvusStore) -> None:
    hit = docs.dense_search("docs", unit(0, 0, 0, 1), 1, None, include_vectors=True)[0]
    assert hit.chunk.id == "c:0"
    assert hit.chunk.vector == pytest.approx(unit(0, 0, 0, 1))


def test_dense_search_checks_the_query(docs: MilvusStore) -> None:
    with pytest.raises(InvalidArgument, match="3 dimensions but collection 'docs' stores 4"):
        docs.dense_search("docs", [1.0, 0.0, 0.0], 3, None)
    with pytest.raises(InvalidArgument, match="k must be between"):
        docs.dense_search("docs", unit(1, 0, 0, 0), 0, None)


def test_sparse_search_is_bm25_best_first(docs: MilvusStore) -> None:
    hits = docs.sparse_search("docs", "neural networks folding", 10, None)
    ids = [h.chunk.id for h in hits]
    assert ids[:2] == ["b:0", "b:1"] or ids[:2] == ["b:1", "b:0"]
    assert set(ids) == {"b:0", "b:1", "b:2"}
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert docs.sparse_search("docs", "GRAPHENE", 1, None)[0].chunk.document_id == "a"


def test_sparse_search_ignores_stop_words_and_blank_queries(docs: MilvusStore) -> None:
    assert docs.sparse_search("docs", "the", 5, None) == []  # stop word, indexed nowhere
    assert docs.sparse_search("docs", "   ", 5, None) == []
    assert docs.sparse_search("docs", "unheardofword", 5, None) == []


def test_bm25_matches_word_forms(docs: MilvusStore) -> None:
    # Stemming is ours (analysis.py), so it works on Milvus Lite, which skips stemmer filters.
    assert {h.chunk.id for h in docs.sparse_search("docs", "fold", 5, None)} == {"b:0", "b:2"}
    assert {h.chunk.id for h in docs.sparse_search("docs", "folds", 5, None)} == {"b:0", "b:2"}


def test_searches_see_writes_at_once(docs: MilvusStore) -> None:
    docs.upsert("docs", [make_chunk("z", 0, "zeppelin airships", unit(1, 1, 1, 1))])
    assert docs.sparse_search("docs", "zeppelin", 1, None)[0].chunk.id == "z:0"
    assert docs.dense_search("docs", unit(1, 1, 1, 1), 1, None)[0].chunk.id == "z:0"
    docs.delete_documents("docs", ["z"])
    assert docs.sparse_search("docs", "zeppelin", 1, None) == []


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
    docs: MilvusStore, flt: dict[str, Any], expected: set[str]
) -> None:
    parsed = parse_filter(flt)
    dense = docs.dense_search("docs", unit(1, 1, 1, 1), 10, parsed, include_vectors=True)
    assert {h.chunk.id for h in dense} == expected
    sparse = docs.sparse_search("docs", "graphene neural folding quantum the", 10, parsed)
    assert {h.chunk.id for h in sparse} <= expected
    # The Python predicate (for in-process backends) decides every chunk the same way.
    everything = docs.dense_search("docs", unit(1, 1, 1, 1), 10, None, include_vectors=True)
    assert {h.chunk.id for h in everything if matches(parsed, h.chunk)} == expected


def test_escaped_values_match_exactly(docs: MilvusStore) -> None:
    tricky = 'say "hi" \\ back\\"slash\nnew'
    docs.upsert("docs", [make_chunk("q", 0, "quoted", metadata={"quote": tricky})])
    hits = docs.dense_search("docs", unit(1, 1, 1, 1), 10, parse_filter({"quote": tricky}))
    assert [h.chunk.id for h in hits] == ["q:0"]
    assert hits[0].chunk.metadata == {"quote": tricky}


# -- persistence, processes, threads ---------------------------------------------------


def test_data_survives_reopening_in_this_and_a_new_process(docs: MilvusStore, db_path: str) -> None:
    docs.close()
    again = MilvusStore(uri=db_path)
    try:
        assert again.count("docs") == (6, 3)
        assert again.get_collection("docs").description == "test docs"
        assert again.sparse_search("docs", "graphene", 1, None)[0].chunk.document_id == "a"
    finally:
        again.close()
    result = run_in_new_process(
        "import json\n"
        "from services.retriever.backends.milvus import MilvusStore\n"
        "from services.retriever.backends.base import ChunkRecord\n"
        f"s = MilvusStore(uri={db_path!r})\n"
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
    back = MilvusStore(uri=db_path)
    try:
        assert back.count("docs") == (7, 4)
    finally:
        back.close()


def test_a_second_process_gets_unavailable_while_the_file_is_open(
    docs: MilvusStore, db_path: str
) -> None:
    result = run_in_new_process(
        "import json, logging\n"
        "logging.disable(logging.CRITICAL)\n"
        "from services.retriever.backends.milvus import MilvusStore\n"
        "from shared.errors import Unavailable\n"
        "try:\n"
        f"    MilvusStore(uri={db_path!r})\n"
        "    print(json.dumps({'error': None}))\n"
        "except Unavailable as e:\n"
        "    print(json.dumps({'error': e.message}))\n"
    )
    assert result["error"] is not None and db_path in result["error"]
    assert "only one process" in result["error"]


def test_two_stores_on_one_file_in_one_process(docs: MilvusStore, db_path: str) -> None:
    other = MilvusStore(uri=db_path)
    other.close()  # must not stop the server the first store still uses
    assert docs.count("docs") == (6, 3)


def test_concurrent_writes_and_searches(docs: MilvusStore) -> None:
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for batch in range(5):
                doc = f"w{worker}_{batch}"
                docs.upsert("docs", [make_chunk(doc, i, f"worker text {i}") for i in range(4)])
                docs.delete_stale_chunks("docs", [doc], [f"{doc}:0", f"{doc}:1", f"{doc}:2"])
        except BaseException as exc:  # collected: a thread's exception would vanish
            errors.append(exc)

    def search() -> None:
        try:
            for _ in range(10):
                docs.dense_search("docs", unit(1, 1, 1, 1), 5, parse_filter({"n": {"$gte": 1}}))
                docs.sparse_search("docs", "worker text", 5, None)
                docs.count("docs")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    threads += [threading.Thread(target=search) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert docs.count("docs") == (6 + 3 * 5 * 3, 3 + 3 * 5)


# -- failures --------------------------------------------------------------------------


def test_unreachable_server_is_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"http://user:secret@127.0.0.1:{port}"
    with pytest.raises(Unavailable) as err:
        MilvusStore(uri=uri, timeout_s=2)
    assert f"127.0.0.1:{port}" in err.value.message and "secret" not in err.value.message


def test_server_that_went_away_is_unavailable(docs: MilvusStore, db_path: str) -> None:
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(db_path)  # stops the in-process Lite server
    with pytest.raises(Unavailable) as err:
        docs.dense_search("docs", unit(1, 0, 0, 0), 1, None)
    assert f"cannot reach Milvus at {db_path}" in err.value.message


def test_old_single_file_database_is_explained(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    old.write_bytes(b"milvus lite 2 data")
    with pytest.raises(Unavailable, match="Milvus Lite 2"):
        MilvusStore(uri=str(old))


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"uri": ""}, "uri is empty"),
        ({"index_type": "DISKANN"}, "unknown Milvus index type"),
        ({"collection_prefix": "bad-prefix"}, "collection prefix"),
        ({"timeout_s": 0}, "timeout must be positive"),
    ],
)
def test_bad_options(db_path: str, kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=fragment):
        MilvusStore(**{"uri": db_path, **kwargs})


def test_closed_store_is_unavailable(db_path: str) -> None:
    s = MilvusStore(uri=db_path)
    s.close()
    s.close()  # idempotent
    with pytest.raises(Unavailable, match="closed"):
        s.list_collections()


def test_analysis_is_configurable_and_pinned_per_collection(tmp_path: Path) -> None:
    uri = str(tmp_path / "plain.db")
    s = MilvusStore(uri=uri, analyzer=LexicalAnalyzer(""))
    try:
        assert s.describe()["analyzer"] == "words+lowercase+stop33+stem:none"
        s.create_collection("docs", DIM)
        s.upsert("docs", [make_chunk("a", 0, "folding cats")])
        assert s.sparse_search("docs", "fold", 5, None) == []  # no stemming
        assert [h.chunk.id for h in s.sparse_search("docs", "folding", 5, None)] == ["a:0"]
    finally:
        s.close()
    stemming = MilvusStore(uri=uri)
    try:
        with pytest.raises(FailedPrecondition, match="re-create the collection"):
            stemming.sparse_search("docs", "folding", 5, None)
    finally:
        stemming.close()


def test_hnsw_index(tmp_path: Path) -> None:
    s = MilvusStore(uri=str(tmp_path / "hnsw.db"), index_type="HNSW")
    try:
        s.create_collection("docs", DIM)
        s.upsert("docs", [make_chunk("a", i, vector=unit(1, i, 0, 0)) for i in range(5)])
        assert s.dense_search("docs", unit(1, 0, 0, 0), 2, None)[0].chunk.id == "a:0"
        assert s.describe()["index_type"] == "HNSW"
    finally:
        s.close()
