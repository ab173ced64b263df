"""MilvusStore against Milvus Lite files under tmp_path: what only the Milvus backend does
(collection prefixes, its collection cache, several stores on one Lite file, unreachable or
vanished servers, old Lite databases, the HNSW index). The behaviours every backend shares,
its option checks among them, are in test_backend_contract.py."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from services.retriever.backends.base import SearchRequest
from services.retriever.backends.milvus import MilvusStore
from services.retriever.backends.milvus.schema import PROP_ANALYZER, PROP_SCHEMA, collection_schema
from services.retriever.filters import parse_filter
from shared.errors import DeadlineExceeded, NotFound, Unavailable
from tests.ports import free_port
from tests.retriever.stores import DIM, make_chunk, unit


@pytest.fixture
def backend() -> str:
    """Only Milvus here: conftest.py opens `store` and `docs` on the Lite file `location`."""
    return "milvus"


# -- collections -----------------------------------------------------------------------


def test_collection_deleted_behind_the_cache_is_not_found(docs: MilvusStore) -> None:
    docs.count("docs")  # remembered as open
    docs._client.drop_collection("ragrail_docs")
    with pytest.raises(NotFound):
        docs.dense_search("docs", unit(1, 0, 0, 0), 3, None)


def test_collections_of_other_prefixes_are_invisible(location: str, store: MilvusStore) -> None:
    store.create_collection("mine", DIM)
    other = MilvusStore(uri=location, collection_prefix="other_")
    try:
        other.create_collection("theirs", DIM)
        assert [c.name for c in store.list_collections()] == ["mine"]
        assert [c.name for c in other.list_collections()] == ["theirs"]
        with pytest.raises(NotFound):
            store.get_collection("theirs")
    finally:
        other.close()


def test_collection_released_behind_the_cache_is_loaded_again(docs: MilvusStore) -> None:
    """Lite held a collection 'released' after a crash-restart once, although it had been
    opened; reads load it again instead of failing."""

    def dense() -> list:
        # All six chunks: with a cut at 3, which of the chunks tied at the cut comes back is
        # Milvus's choice, and it differed between two reads once (CI, 2026-12-05).
        hits = docs.dense_search("docs", unit(1, 0, 0, 0), 6, None)
        return sorted(hits, key=lambda h: (-h.score, h.chunk.id))

    first = dense()
    docs._client.release_collection("ragrail_docs")
    assert dense() == first
    docs._client.release_collection("ragrail_docs")
    assert docs.sparse_search("docs", "graphene", 3, None) == docs.sparse_search(
        "docs", "graphene", 3, None
    )
    docs._client.release_collection("ragrail_docs")
    assert docs.count("docs") == (6, 3)


def test_a_load_of_a_file_lite_is_still_writing_is_tried_again(
    docs: MilvusStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once, on a loaded machine, Lite's load of a collection just released answered "File is
    too small: 0"; the store tries such a load again. Any other load error is raised at once."""
    from pymilvus.exceptions import MilvusException

    real_load = docs._client.load_collection
    loads: list[str] = []

    def load_failing(message: str, times: int) -> object:
        """load_collection answering `message` for its first `times` calls."""

        def load(name: str, **kwargs: object) -> None:
            loads.append(name)
            if len(loads) <= times:
                raise MilvusException(message=message)
            real_load(name, **kwargs)

        return load

    hits = docs.dense_search("docs", unit(1, 0, 0, 0), 3, None)
    docs._client.release_collection("ragrail_docs")
    monkeypatch.setattr(docs._client, "load_collection", load_failing("File is too small: 0", 1))
    assert len(docs.dense_search("docs", unit(1, 0, 0, 0), 3, None)) == len(hits)
    assert loads == ["ragrail_docs", "ragrail_docs"]

    loads.clear()
    docs._client.release_collection("ragrail_docs")
    monkeypatch.setattr(docs._client, "load_collection", load_failing("disk on fire", 99))
    with pytest.raises(Exception, match="disk on fire"):
        docs.dense_search("docs", unit(1, 0, 0, 0), 3, None)
    assert loads == ["ragrail_docs"]  # not tried again
    monkeypatch.setattr(docs._client, "load_collection", real_load)
    assert len(docs.dense_search("docs", unit(1, 0, 0, 0), 3, None)) == len(hits)  # loaded


# Seen on a 2-core AVX2 machine (2026-11-26), twice in the full suite and never alone or with
# tests/ragrail..retriever: Milvus Lite's own load_collection after the reopen waits 60 s and
# gives up ("wait for loading collection timeout"), inside pymilvus. Not understood yet.
@pytest.mark.xfail(
    strict=False,
    reason="Milvus Lite's first load after a reopen can stall deep in the full suite on a slow "
    "machine (wait for loading collection timeout); passes alone",
    raises=DeadlineExceeded,
)
def test_concurrent_first_reads_after_reopening(docs: MilvusStore, location: str) -> None:
    docs.close()
    # What is tested is that concurrent first reads all answer, not how fast.
    reopened = MilvusStore(uri=location, timeout_s=60)
    try:
        with ThreadPoolExecutor(8) as pool:
            found = list(
                pool.map(
                    lambda i: len(
                        reopened.dense_search("docs", unit(1, 0, 0, 0), 3, None)
                        if i % 2
                        else reopened.sparse_search("docs", "graphene", 3, None)
                    ),
                    range(16),
                )
            )
        assert all(n > 0 for n in found), found
    finally:
        reopened.close()


# -- access lists -----------------------------------------------------------------------


def test_access_filter_tests_columns_not_json(docs: MilvusStore) -> None:
    """The mandatory access filter is a plain column test (Lite runs JSON functions row by row
    in Python); the rows carry the columns."""
    flt = parse_filter({"$and": [{"year": 2019}, {"access_groups": {"$unset_or_any": ["a"]}}]})
    expression = docs._filter_expr(SearchRequest("docs", 3, flt, False))
    assert expression.startswith('metadata["year"] == 2019 and (access_listed == false or ')
    assert "json_contains_any" not in expression and "exists" not in expression
    docs.upsert("docs", [make_chunk("z", 0, metadata={"access_groups": ["a", "b"]})])
    (row,) = docs._client.query(
        "ragrail_docs",
        filter='id == "z:0"',
        output_fields=["access_listed", "access_0", "access_1", "access_2"],
    )
    assert (row["access_listed"], row["access_0"], row["access_1"], row["access_2"]) == (
        True, "a", "b", None,
    )  # fmt: skip


def test_collection_without_access_columns_keeps_the_json_test(store: MilvusStore) -> None:
    """A collection made before schema version 3 has no access columns: its rows are written
    without them and its filters test the JSON metadata."""
    old = collection_schema(DIM)
    old.fields[:] = [f for f in old.fields if not f.name.startswith("access_")]
    store._client.create_collection(
        "ragrail_old",
        schema=old,
        properties={PROP_ANALYZER: store._analyzer.signature, PROP_SCHEMA: "2"},
    )
    params = store._client.prepare_index_params()
    params.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
    params.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    store._client.create_index("ragrail_old", params, sync=False)
    store._client.load_collection("ragrail_old")
    store.upsert(
        "old",
        [
            make_chunk("a", 0, metadata={"access_groups": ["team-a"]}),
            make_chunk("b", 0, metadata={"access_groups": ["team-b"]}),
            make_chunk("o", 0, metadata={}),
        ],
    )
    flt = parse_filter({"access_groups": {"$unset_or_any": ["team-a"]}})
    assert "json_contains_any" in store._filter_expr(SearchRequest("old", 3, flt, False))
    assert {h.chunk.id for h in store.dense_search("old", unit(1, 1, 1, 1), 5, flt)} == {
        "a:0",
        "o:0",
    }


# -- processes --------------------------------------------------------------------------


def test_a_reopened_lite_store_loads_its_collections_before_the_first_read(
    docs: MilvusStore, location: str
) -> None:
    from pymilvus.client.types import LoadState

    docs.close()  # the Lite server stops with its last store: the next one loads nothing
    again = MilvusStore(uri=location)
    try:
        assert again._client.get_load_state("ragrail_docs")["state"] != LoadState.Loaded
        assert again.open_all() == ["docs"]
        assert again._client.get_load_state("ragrail_docs")["state"] == LoadState.Loaded
    finally:
        again.close()


def test_two_stores_on_one_file_in_one_process(docs: MilvusStore, location: str) -> None:
    other = MilvusStore(uri=location)
    other.close()  # must not stop the server the first store still uses
    assert docs.count("docs") == (6, 3)


# -- failures --------------------------------------------------------------------------


def test_unreachable_server_is_unavailable() -> None:
    port = free_port()  # nobody listens there
    uri = f"http://user:secret@127.0.0.1:{port}"
    with pytest.raises(Unavailable) as err:
        MilvusStore(uri=uri, timeout_s=2)
    assert f"127.0.0.1:{port}" in err.value.message and "secret" not in err.value.message


def test_server_that_went_away_is_unavailable(docs: MilvusStore, location: str) -> None:
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(location)  # stops the in-process Lite server
    with pytest.raises(Unavailable) as err:
        docs.dense_search("docs", unit(1, 0, 0, 0), 1, None)
    assert f"cannot reach Milvus at {location}" in err.value.message


def test_old_single_file_database_is_explained(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    old.write_bytes(b"milvus lite 2 data")
    with pytest.raises(Unavailable, match="Milvus Lite 2"):
        MilvusStore(uri=str(old))


def test_hnsw_index(tmp_path: Path) -> None:
    s = MilvusStore(uri=str(tmp_path / "hnsw.db"), index_type="HNSW")
    try:
        s.create_collection("docs", DIM)
        s.upsert("docs", [make_chunk("a", i, vector=unit(1, i, 0, 0)) for i in range(5)])
        assert s.dense_search("docs", unit(1, 0, 0, 0), 2, None)[0].chunk.id == "a:0"
        assert s.describe()["index_type"] == "HNSW"
    finally:
        s.close()
