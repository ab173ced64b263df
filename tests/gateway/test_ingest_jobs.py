"""Per-request ingest limits (413 naming the setting) and the ingest job API for large uploads:
submit (202), progress, cancel, against the real gateway, embedder and retriever."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from ragrail.sample import SAMPLE_CORPUS
from tests.conftest import gateway_process

pytestmark = pytest.mark.integration
COLLECTION = "jobs"
WORDS = " ".join(f"word{i} about bees and flowers." for i in range(400))  # ~2,000 tokens


@pytest.fixture(scope="module")
def collection(suite) -> str:  # type: ignore[no-untyped-def]
    reply = suite.http.post("/v1/collections", json={"name": COLLECTION})
    assert reply.status_code == 201, reply.text
    return COLLECTION


@pytest.fixture(scope="module")
def limited(suite, collection) -> Iterator[httpx.Client]:  # type: ignore[no-untyped-def]
    """A gateway of its own with small limits."""
    with gateway_process(
        ingest_max_mb="0.05", ingest_max_chunks="3", ingest_job_max_chunks="5"
    ) as url:
        yield httpx.Client(base_url=url, timeout=120)


def _wait_for(client: httpx.Client, job_id: str, states: set[str], timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/v1/ingest/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, f"job still {job['state']}: {job}"
        time.sleep(0.2)


def _many_chunks(collection: str, *names: str) -> dict:
    """A JSON ingest into `collection` of a document of WORDS per name, in 64-token chunks."""
    documents = [{"name": name, "text": WORDS} for name in names]
    return {"collection": collection, "chunk_size": 64, "documents": documents}


def _total(client: httpx.Client) -> int:
    return client.get("/v1/documents", params={"collection": COLLECTION}).json()["total"]


def test_an_ingest_over_the_byte_limit_is_413_naming_the_setting(limited) -> None:  # type: ignore[no-untyped-def]
    before = _total(limited)
    reply = limited.post(
        "/v1/documents",
        data={"collection": COLLECTION},
        files=[("files", ("big.txt", b"bees " * 20_000))],
    )
    assert reply.status_code == 413, reply.text
    message = reply.json()["error"]["message"]
    assert "RAGRAIL_GATEWAY_INGEST_MAX_MB" in message and "/v1/ingest/jobs" in message
    assert _total(limited) == before


def test_an_ingest_over_the_chunk_limit_is_413_before_any_embedding(limited) -> None:  # type: ignore[no-untyped-def]
    before = _total(limited)
    reply = limited.post("/v1/documents", json=_many_chunks(COLLECTION, "many-chunks.txt"))
    assert reply.status_code == 413, reply.text
    assert "RAGRAIL_GATEWAY_INGEST_MAX_CHUNKS" in reply.json()["error"]["message"]
    assert _total(limited) == before


def test_a_job_ingests_in_the_background_and_reports_progress(suite, collection) -> None:  # type: ignore[no-untyped-def]
    paths = sorted(SAMPLE_CORPUS.iterdir())
    reply = suite.http.post(
        "/v1/ingest/jobs",
        data={"collection": collection},
        files=[("files", (p.name, p.read_bytes())) for p in paths],
    )
    assert reply.status_code == 202, reply.text
    job = reply.json()
    assert job["state"] in ("queued", "running") and job["documents_total"] == len(paths)
    assert reply.headers["Location"] == f"/v1/ingest/jobs/{job['id']}"
    done = _wait_for(suite.http, job["id"], {"succeeded", "failed", "cancelled"})
    assert done["state"] == "succeeded", done
    assert done["documents_done"] == done["documents_total"] == len(paths)
    assert done["chunks_done"] == done["chunks_total"] == done["result"]["total_chunks"] > 0
    assert done["started_at"] >= done["created_at"] and done["finished_at"] >= done["started_at"]
    listed = suite.http.get("/v1/documents", params={"collection": collection}).json()
    assert {p.name for p in paths} <= {d["id"] for d in listed["documents"]}
    jobs = suite.http.get("/v1/ingest/jobs").json()["jobs"]
    assert job["id"] in [j["id"] for j in jobs]
    # DELETE of a finished job leaves it as it was.
    again = suite.http.delete(f"/v1/ingest/jobs/{job['id']}")
    assert again.status_code == 200 and again.json()["state"] == "succeeded"


def test_a_running_job_can_be_cancelled(suite, collection) -> None:  # type: ignore[no-untyped-def]
    body = _many_chunks(collection, *(f"long-{i}.txt" for i in range(24)))
    documents = body["documents"]
    reply = suite.http.post("/v1/ingest/jobs", json=body)
    assert reply.status_code == 202, reply.text
    job_id = reply.json()["id"]
    _wait_for(suite.http, job_id, {"running"}, timeout=60)
    time.sleep(0.5)
    cancelled = suite.http.delete(f"/v1/ingest/jobs/{job_id}")
    assert cancelled.status_code == 200, cancelled.text
    job = cancelled.json()
    assert job["state"] == "cancelled", job
    assert job["documents_done"] < job["documents_total"] or job["documents_total"] == 0
    assert suite.http.get(f"/v1/ingest/jobs/{job_id}").json()["state"] == "cancelled"
    stored = {
        d["id"]
        for d in suite.http.get(
            "/v1/documents", params={"collection": collection, "limit": 1000}
        ).json()["documents"]
    }
    # Documents are stored whole: at least those the job reported done (an upsert the retriever
    # had already received when the job stopped may still land), and not all of them.
    assert job["documents_done"] <= len(stored & {d["name"] for d in documents}) < len(documents)


def test_job_errors(suite, limited, collection) -> None:  # type: ignore[no-untyped-def]
    unknown = suite.http.post(
        "/v1/ingest/jobs",
        json={"collection": "no_such_collection", "documents": [{"name": "a", "text": "b"}]},
    )
    assert unknown.status_code == 404, unknown.text
    assert suite.http.get("/v1/ingest/jobs/ingest-nope").status_code == 404
    assert suite.http.delete("/v1/ingest/jobs/ingest-nope").status_code == 404
    bad = suite.http.post(
        "/v1/ingest/jobs",
        json={"collection": collection, "documents": [{"name": "x\x00y", "text": "b"}]},
    )
    assert bad.status_code == 422 and "documents[0].name" in bad.text
    # Over the job's chunk limit: the job fails with a 413-coded error naming the setting.
    reply = limited.post("/v1/ingest/jobs", json=_many_chunks(collection, "m"))
    assert reply.status_code == 202, reply.text
    job = _wait_for(limited, reply.json()["id"], {"succeeded", "failed", "cancelled"})
    assert job["state"] == "failed" and job["error"]["code"] == 413, job
    assert "RAGRAIL_GATEWAY_INGEST_JOB_MAX_CHUNKS" in job["error"]["message"]
