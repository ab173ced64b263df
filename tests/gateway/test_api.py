"""The gateway over HTTP against the real embedder and retriever processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragrail.sample import SAMPLE_CORPUS

pytestmark = pytest.mark.integration
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _files(paths: list[Path]) -> list[tuple[str, tuple[str, bytes]]]:
    return [("files", (p.name, p.read_bytes())) for p in paths]


@pytest.fixture(scope="module")
def corpus(suite):  # type: ignore[no-untyped-def]
    """The sample corpus ingested into collection 'corpus'."""
    reply = suite.http.post("/v1/collections", json={"name": "corpus", "description": "samples"})
    assert reply.status_code == 201, reply.text
    paths = sorted(SAMPLE_CORPUS.iterdir())
    reply = suite.http.post("/v1/documents", data={"collection": "corpus"}, files=_files(paths))
    assert reply.status_code == 200, reply.text
    return reply.json()


def _stats(suite, name: str) -> dict:  # type: ignore[no-untyped-def]
    reply = suite.http.get(f"/v1/collections/{name}")
    assert reply.status_code == 200, reply.text
    return reply.json()


def _search(suite, query: str, collection: str = "corpus", **options) -> dict:  # type: ignore[no-untyped-def]
    reply = suite.http.post(
        "/v1/search", json={"query": query, "collection": collection, **options}
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_health_reports_each_service(suite) -> None:  # type: ignore[no-untyped-def]
    body = suite.http.get("/v1/health").json()
    assert body["status"] == "ok"
    assert {n: s["status"] for n, s in body["services"].items()} == {
        "embedder": "SERVING",
        "retriever": "SERVING",
        "generator": "SERVING",
    }


def test_ingest_reports_every_document(suite, corpus) -> None:  # type: ignore[no-untyped-def]
    names = sorted(p.name for p in SAMPLE_CORPUS.iterdir())
    assert sorted(d["name"] for d in corpus["documents"]) == names
    assert corpus["total_chunks"] >= len(names)
    stats = _stats(suite, "corpus")
    assert stats["num_documents"] == len(names)
    assert stats["num_chunks"] == corpus["total_chunks"]
    assert stats["dimension"] == 384


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_search_finds_the_right_document_in_every_mode(suite, corpus, mode) -> None:  # type: ignore[no-untyped-def]
    result = _search(suite, "waggle dance of honeybees foraging", mode=mode, top_k=3)
    assert result["mode"] == mode
    assert result["hits"][0]["document_name"] == "honeybee-colonies.md"
    assert len(result["hits"]) == 3
    hit = result["hits"][0]
    assert hit["metadata"]["content_type"] == "text/markdown"
    if mode == "hybrid":
        assert hit["dense_score"] is not None and hit["sparse_score"] is not None
    if mode == "sparse":
        assert result["timings"]["embed_ms"] < 5  # no embedding for keyword search


def test_weighted_fusion_and_candidate_depth(suite, corpus) -> None:  # type: ignore[no-untyped-def]
    result = _search(
        suite,
        "TCP three-way handshake SYN ACK",
        fusion="weighted",
        dense_weight=0.3,
        sparse_weight=0.7,
        vdb_top_k=20,
        top_k=2,
    )
    assert result["hits"][0]["document_name"] == "tcp-handshake.md"
    assert result["hits"][0]["score"] <= 1.0


def test_filter_restricts_results(suite, corpus) -> None:  # type: ignore[no-untyped-def]
    result = _search(suite, "honeybees", filter={"document_id": "rhine-history.md"})
    assert result["hits"] and {h["document_id"] for h in result["hits"]} == {"rhine-history.md"}
    result = _search(suite, "honeybees", filter={"content_type": {"$in": ["text/html"]}})
    assert {h["document_name"] for h in result["hits"]} == {"mars-rovers.html"}


def test_reingest_replaces_instead_of_duplicating(suite, corpus) -> None:  # type: ignore[no-untyped-def]
    before = _stats(suite, "corpus")
    paths = sorted(SAMPLE_CORPUS.iterdir())
    reply = suite.http.post("/v1/documents", data={"collection": "corpus"}, files=_files(paths))
    assert reply.status_code == 200
    assert _stats(suite, "corpus") == before


def test_json_documents_with_metadata_and_shrinking_versions(suite) -> None:  # type: ignore[no-untyped-def]
    assert suite.http.post("/v1/collections", json={"name": "notes"}).status_code == 201
    long_text = " ".join(f"Sentence {i} is about glaciers carving valleys." for i in range(300))
    body = {
        "collection": "notes",
        "metadata": {"team": "geo"},
        "documents": [
            {"name": "glaciers.txt", "text": long_text, "metadata": {"year": 2021}},
            {
                "name": "kiln.md",
                "id": "kiln",
                "text": "# Kilns\nA kiln fires clay into ceramics.",
                "content_type": "text/markdown",
                "metadata": {"year": 2019},
            },
        ],
    }
    first = suite.http.post("/v1/documents", json=body).json()
    glacier_chunks = next(d["chunks"] for d in first["documents"] if d["id"] == "glaciers.txt")
    assert glacier_chunks > 3
    result = _search(suite, "ceramics", "notes", filter={"year": {"$lt": 2020}, "team": "geo"})
    assert [h["document_id"] for h in result["hits"]] == ["kiln"]
    assert result["hits"][0]["metadata"]["year"] == 2019
    # A shorter new version leaves no stale chunks behind.
    body["documents"][0]["text"] = "Glaciers carve U-shaped valleys."
    second = suite.http.post("/v1/documents", json=body).json()
    assert second["replaced_chunks"] == glacier_chunks - 1
    assert _stats(suite, "notes")["num_chunks"] == 2
    docs = suite.http.get("/v1/documents", params={"collection": "notes"}).json()
    assert docs["total"] == 2
    assert {d["id"]: d["chunks"] for d in docs["documents"]} == {"glaciers.txt": 1, "kiln": 1}
    deleted = suite.http.delete("/v1/documents/kiln", params={"collection": "notes"})
    assert deleted.json() == {"deleted_chunks": 1}
    again = suite.http.delete("/v1/documents/kiln", params={"collection": "notes"})
    assert again.status_code == 404


def test_pdf_and_docx_are_parsed(suite) -> None:  # type: ignore[no-untyped-def]
    suite.http.post("/v1/collections", json={"name": "office"})
    paths = [FIXTURES / "sample.pdf", FIXTURES / "sample.docx"]
    reply = suite.http.post("/v1/documents", data={"collection": "office"}, files=_files(paths))
    assert reply.status_code == 200, reply.text
    types = {d["name"]: d["content_type"] for d in reply.json()["documents"]}
    assert types["sample.pdf"] == "application/pdf"
    assert types["sample.docx"].endswith("wordprocessingml.document")
    assert all(d["characters"] > 20 for d in reply.json()["documents"])


def test_collections_lifecycle(suite) -> None:  # type: ignore[no-untyped-def]
    assert suite.http.post("/v1/collections", json={"name": "tmp_c"}).status_code == 201
    dup = suite.http.post("/v1/collections", json={"name": "tmp_c"})
    assert dup.status_code == 409 and "already exists" in dup.json()["error"]["message"]
    names = [c["name"] for c in suite.http.get("/v1/collections").json()["collections"]]
    assert "tmp_c" in names
    assert suite.http.delete("/v1/collections/tmp_c").status_code == 204
    assert suite.http.delete("/v1/collections/tmp_c").status_code == 404


def _upload(name: str, content: bytes, **data: str) -> dict:
    """Request arguments: a multipart upload of one file into 'corpus', with form `data`."""
    return {"data": {"collection": "corpus", **data}, "files": [("files", (name, content))]}


def _query(**body: object) -> dict:
    """Request arguments: a search for "x" in 'corpus', with `body` on top."""
    return {"json": {"query": "x", "collection": "corpus", **body}}


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "fragment"),
    [
        ("post", "/v1/search", _query(collection="nope"), 404, "does not exist"),
        ("get", "/v1/collections/nope", {}, 404, "does not exist"),
        (
            "post",
            "/v1/documents",
            {"json": {"collection": "nope", "documents": [{"name": "a.txt", "text": "hello"}]}},
            404,
            "does not exist",
        ),
        ("post", "/v1/documents", _upload("tool.exe", b"MZ\x00\x01"), 415, ".txt"),
        (
            "post",
            "/v1/documents",
            {"content": b"hello", "headers": {"content-type": "text/plain"}},
            415,
            "multipart/form-data",
        ),
        ("post", "/v1/documents", _upload("big.txt", b"a " * 1_500_000), 413, "larger than"),
        ("post", "/v1/documents", _upload("empty.txt", b"   "), 422, "no text"),
        ("post", "/v1/documents", _upload("a.txt", b"hello", chunk_size="5"), 422, "chunk_size"),
        ("post", "/v1/documents", _upload("a.txt", b"hello", chunk_size="4000"), 422, "exceeds"),
        (
            "post",
            "/v1/documents",
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
            422,
            "invalid",
        ),
        ("post", "/v1/search", _query(top_k=0), 422, "top_k"),
        ("post", "/v1/search", _query(mode="fuzzy"), 422, "mode"),
        ("post", "/v1/search", _query(filter={"year": {"$regex": "x"}}), 422, "$regex"),
        ("post", "/v1/search", _query(collection="Bad-Name"), 422, "collection"),
        ("post", "/v1/collections", {"json": {"name": "9lives"}}, 422, "name"),
    ],
)
def test_bad_input_gets_a_precise_4xx(
    suite, corpus, method, path, kwargs, status, fragment
) -> None:  # type: ignore[no-untyped-def]
    reply = getattr(suite.http, method)(path, **kwargs)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert fragment in error["message"]
    assert "Traceback" not in reply.text


def test_restarted_retriever_keeps_data_and_gateway_reconnects(suite, corpus) -> None:  # type: ignore[no-untyped-def]
    before = _search(suite, "sourdough starter fermentation", top_k=3)
    suite.restart("retriever")
    after = _search(suite, "sourdough starter fermentation", top_k=3)
    assert [h["chunk_id"] for h in after["hits"]] == [h["chunk_id"] for h in before["hits"]]
    assert after["hits"][0]["document_name"] == "sourdough-baking.txt"


def test_openapi_documents_both_ingest_formats(suite) -> None:  # type: ignore[no-untyped-def]
    spec = suite.http.get("/openapi.json").json()
    content = spec["paths"]["/v1/documents"]["post"]["requestBody"]["content"]
    assert set(content) == {"multipart/form-data", "application/json"}
    assert {"/v1/search", "/v1/collections", "/v1/health"} <= set(spec["paths"])
    assert suite.http.get("/docs").status_code == 200
    assert "ragrail_http_requests_total" in suite.http.get("/metrics").text
    json.dumps(spec)


def test_rerank_without_a_reranker_is_a_clear_409(suite, corpus) -> None:  # type: ignore[no-untyped-def]
    reply = suite.http.post(
        "/v1/search", json={"query": "bees", "collection": "corpus", "rerank": True}
    )
    assert reply.status_code == 409
    assert "RAGRAIL_GATEWAY_RERANKER_URL" in reply.json()["error"]["message"]
    assert _search(suite, "bees")["reranked"] is False


def test_a_down_reranker_degrades_to_first_stage_results(suite, corpus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess
    import sys
    import time

    import httpx

    from tests.conftest import free_port

    port = free_port()
    env = {
        **os.environ,
        "RAGRAIL_GATEWAY_PORT": str(port),
        "RAGRAIL_GATEWAY_RERANKER_URL": f"127.0.0.1:{free_port()}",
    }  # nothing listens
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.gateway"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                health = httpx.get(f"{url}/v1/health", timeout=5)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert health.status_code == 503
        assert health.json()["services"]["reranker"]["status"] == "UNAVAILABLE"
        started = time.perf_counter()
        reply = httpx.post(
            f"{url}/v1/search",
            timeout=30,
            json={"query": "waggle dance", "collection": "corpus", "top_k": 2},
        )
        elapsed = time.perf_counter() - started
        body = reply.json()
        assert reply.status_code == 200, body
        assert body["reranked"] is False and "not reranked" in body["warnings"][0]
        assert len(body["hits"]) == 2 and body["hits"][0]["document_name"] == "honeybee-colonies.md"
        assert elapsed < 5  # degraded quickly, no hang
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_rerank_fusion_rrf_combines_first_stage_and_cross_encoder_orders(
    suite, corpus, tiny_reranker, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import gateway_process, grpc_service

    env = {"RAGRAIL_RERANKER_MODEL": str(tiny_reranker)}
    with (
        grpc_service("services.reranker", "RERANKER", env, tmp_path / "reranker.log") as target,
        gateway_process(reranker_url=target) as url,
    ):
        import httpx

        def search(**options: object) -> list[dict]:
            body = {"query": "bees and flowers", "collection": "corpus", "vdb_top_k": 8}
            reply = httpx.post(f"{url}/v1/search", json={**body, **options}, timeout=60)
            assert reply.status_code == 200, reply.text
            return reply.json()["hits"]

        first = [h["chunk_id"] for h in search(rerank=False, top_k=8)]
        reranked = search(rerank=True, reranker_top_k=8, rerank_fusion="none")
        fused = search(rerank=True, reranker_top_k=5, rerank_fusion="rrf")
    cross = [h["chunk_id"] for h in reranked]
    assert sorted(first) == sorted(cross)  # the same candidates, in two orders
    expected = {c: 1 / (60 + first.index(c) + 1) + 1 / (60 + cross.index(c) + 1) for c in first}
    # ties (rank 1 and 2 against 2 and 1) go to the cross-encoder's order
    want = sorted(expected, key=lambda c: (-expected[c], cross.index(c)))[:5]
    assert [h["chunk_id"] for h in fused] == want
    for hit in fused:
        assert abs(hit["score"] - expected[hit["chunk_id"]]) < 1e-9
        assert hit["rerank_score"] is not None
