"""The retriever as a real process, over gRPC: validation, idempotent upserts, search modes."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import grpc
import pytest

from shared.proto.ragrail.v1 import common_pb2, retriever_pb2, retriever_pb2_grpc
from shared.structs import dict_to_struct
from tests.grpc_calls import unary

pytestmark = pytest.mark.integration
pb = retriever_pb2


_rpc = functools.partial(unary, retriever_pb2_grpc.RetrieverStub, timeout=30)


def _chunk(i: int, doc: str, text: str, vector: list[float]) -> pb.Chunk:
    return pb.Chunk(
        id=f"{doc}-{i}",
        document_id=doc,
        document_name=doc,
        chunk_index=i,
        text=text,
        vector=vector,
        metadata=dict_to_struct({"n": i}),
    )


def _create_and_fill(target: str, collection: str) -> pb.UpsertChunksResponse:
    """`collection` created (dimension 3) with two chunks of document a (glaciers) and one of
    document b (tides); the upsert's reply."""
    _rpc(target, "CreateCollection", pb.CreateCollectionRequest(name=collection, dimension=3))
    chunks = [
        _chunk(0, "a", "alpine glaciers melt in summer", [1, 0, 0]),
        _chunk(1, "a", "glacier ice flows downhill slowly", [0.9, 0.1, 0]),
        _chunk(0, "b", "ocean tides follow the moon", [0, 1, 0]),
    ]
    return _rpc(
        target, "UpsertChunks", pb.UpsertChunksRequest(collection=collection, chunks=chunks)
    )


def _search(target: str, collection: str = "grpc_t", **request: Any) -> pb.SearchResponse:
    return _rpc(target, "Search", pb.SearchRequest(collection=collection, **request))


@pytest.fixture(scope="module")
def grpc_collection(suite) -> str:  # type: ignore[no-untyped-def]
    target = suite.target("retriever")
    _create_and_fill(target, "grpc_t")
    return target


def test_upserting_the_same_ids_twice_leaves_one_copy(grpc_collection) -> None:  # type: ignore[no-untyped-def]
    again = [_chunk(0, "b", "ocean tides follow the moon", [0, 1, 0])]
    _rpc(grpc_collection, "UpsertChunks", pb.UpsertChunksRequest(collection="grpc_t", chunks=again))
    stats = _rpc(grpc_collection, "GetCollectionStats", pb.GetCollectionStatsRequest(name="grpc_t"))
    assert (stats.num_chunks, stats.num_documents) == (3, 2)


def test_modes_rank_by_their_own_signal(grpc_collection) -> None:  # type: ignore[no-untyped-def]
    dense = _search(grpc_collection, query_vector=[0, 1, 0], mode=pb.SEARCH_MODE_DENSE, fetch_k=1)
    assert dense.hits[0].chunk.id == "b-0" and dense.hits[0].dense_rank == 1
    sparse = _search(
        grpc_collection, query_text="glacier ice", mode=pb.SEARCH_MODE_SPARSE, fetch_k=3
    )
    assert sparse.hits[0].chunk.id == "a-1" and sparse.hits[0].sparse_score > 0
    hybrid = _search(
        grpc_collection,
        query_text="moon tides",
        query_vector=[0, 1, 0],
        fetch_k=2,
        filter=dict_to_struct({"document_id": "b"}),
    )
    assert [h.chunk.id for h in hybrid.hits] == ["b-0"]
    assert hybrid.mode == pb.SEARCH_MODE_HYBRID and hybrid.hits[0].chunk.metadata["n"] == 0


@pytest.mark.parametrize(
    ("method", "request_", "code", "fragment"),
    [
        (
            "Search",
            pb.SearchRequest(collection="grpc_t", query_text="x", mode=pb.SEARCH_MODE_DENSE),
            "INVALID_ARGUMENT",
            "query_vector",
        ),
        (
            "Search",
            pb.SearchRequest(collection="grpc_t", query_vector=[1, 0, 0]),
            "INVALID_ARGUMENT",
            "query_text",
        ),
        (
            "Search",
            pb.SearchRequest(collection="grpc_t", query_text="x", query_vector=[1, 0]),
            "INVALID_ARGUMENT",
            "dimension",
        ),
        (
            "Search",
            pb.SearchRequest(collection="missing", query_text="x", mode=pb.SEARCH_MODE_SPARSE),
            "NOT_FOUND",
            "does not exist",
        ),
        (
            "UpsertChunks",
            pb.UpsertChunksRequest(
                collection="grpc_t",
                chunks=[_chunk(0, "c", "x", [1, 0, 0]), _chunk(0, "c", "y", [1, 0, 0])],
            ),
            "INVALID_ARGUMENT",
            "appears twice",
        ),
        (
            "UpsertChunks",
            pb.UpsertChunksRequest(collection="grpc_t", chunks=[_chunk(0, "c", "x", [])]),
            "INVALID_ARGUMENT",
            "vector is empty",
        ),
        (
            "CreateCollection",
            pb.CreateCollectionRequest(name="grpc_t", dimension=3),
            "ALREADY_EXISTS",
            "grpc_t",
        ),
        (
            "CreateCollection",
            pb.CreateCollectionRequest(name="x", dimension=0),
            "INVALID_ARGUMENT",
            "dimension",
        ),
        (
            "DeleteDocuments",
            pb.DeleteDocumentsRequest(collection="grpc_t"),
            "INVALID_ARGUMENT",
            "document_ids",
        ),
    ],
)
def test_bad_requests_get_a_status_and_a_reason(
    grpc_collection, method, request_, code, fragment
) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        _rpc(grpc_collection, method, request_)
    assert info.value.code().name == code
    assert fragment in info.value.details()


def test_info_names_the_backend(grpc_collection) -> None:  # type: ignore[no-untyped-def]
    info = _rpc(grpc_collection, "Info", common_pb2.InfoRequest())
    assert info.service.service == "retriever" and info.service.backend == "milvus"
    assert pb.SEARCH_MODE_HYBRID in info.modes


@pytest.mark.parametrize("index_type", ["flat", "hnsw"])
def test_faiss_backend_serves_and_keeps_data_across_a_restart(tmp_path, index_type) -> None:  # type: ignore[no-untyped-def]
    """The retriever as its own process on RAGRAIL_RETRIEVER_BACKEND=faiss: create, upsert,
    hybrid search, stop with SIGTERM, start again on the same directory, search again."""
    import os
    import subprocess
    import sys
    import time

    from ragrail.launcher import SERVICES, Child, is_ready
    from tests.conftest import REPO, free_port

    port = free_port()
    env = {
        **os.environ,
        "RAGRAIL_RETRIEVER_BACKEND": "faiss",
        "RAGRAIL_RETRIEVER_FAISS_DIR": str(tmp_path / "faiss"),
        "RAGRAIL_RETRIEVER_FAISS_INDEX": index_type,
        "RAGRAIL_RETRIEVER_FAISS_USE_GPU": "auto",
        "RAGRAIL_RETRIEVER_HOST": "127.0.0.1",
        "RAGRAIL_RETRIEVER_PORT": str(port),
        "RAGRAIL_RETRIEVER_METRICS_PORT": "-1",
    }
    spec = next(s for s in SERVICES if s.name == "retriever")
    child = Child(spec, "127.0.0.1", port, env, tmp_path / "retriever.log")

    def start() -> subprocess.Popen[bytes]:
        with child.log_path.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", spec.module], cwd=REPO, env=env, stdout=log, stderr=log
            )
        deadline = time.monotonic() + 60
        while not asyncio.run(is_ready(child)):
            assert process.poll() is None, child.log_path.read_text()
            assert time.monotonic() < deadline, child.log_path.read_text()
            time.sleep(0.2)
        return process

    def hybrid() -> pb.SearchResponse:
        vector = [0.9, 0.1, 0]
        return _search(target, "faiss_t", query_text="glacier ice", query_vector=vector, fetch_k=2)

    target = f"127.0.0.1:{port}"
    process = start()
    try:
        info = _rpc(target, "Info", common_pb2.InfoRequest())
        assert info.service.backend == "faiss"
        assert info.service.details["index_type"] == index_type
        assert _create_and_fill(target, "faiss_t").upserted == 3
        before = hybrid()
        assert [h.chunk.id for h in before.hits] == ["a-1", "a-0"]
        assert (before.hits[0].dense_rank, before.hits[0].sparse_rank) == (1, 1)
        process.terminate()  # SIGTERM: drains, closes the store, saves the index
        assert process.wait(timeout=30) == 0, child.log_path.read_text()
        saved = [p.name for p in (tmp_path / "faiss" / "faiss_t").glob("index-*.faiss")]
        assert len(saved) == 1 and saved[0].endswith("-g1.faiss")  # written on shutdown
        process = start()
        after = hybrid()
        assert [(h.chunk.id, h.score) for h in after.hits] == [
            (h.chunk.id, h.score) for h in before.hits
        ]
        stats = _rpc(target, "GetCollectionStats", pb.GetCollectionStatsRequest(name="faiss_t"))
        assert (stats.num_chunks, stats.num_documents) == (3, 2)
    finally:
        process.terminate()
        process.wait(timeout=30)
