"""Adversarial access tests: two teams' scoped keys and documents, through the running services
(embedder, generator and a retriever on Milvus Lite or FAISS), every route tried with the
wrong key. Team A must never see a chunk of team B's: not in hits, documents, sources,
citations, answers or the prompt the generator receives (its RAGRAIL_GENERATOR_PROMPT_LOG_FILE),
whatever filter it sends."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.gateway.http.principals import key_digest
from tests.conftest import GatewayUrl, free_port, gateway_process, grpc_service, ops_key

pytestmark = pytest.mark.integration

KEY_A = "rr-team-a-0123456789"
KEY_B = "rr-team-b-9876543210"
KEY_READER = "rr-reader-5555555555"
KEY_OPS = "rr-ops-admin-000000000"
SECRET_B = "ZEPHYR-9"  # in team B's documents only
SECRET_A = "AQUILA-7"

KEY_FILE = f"""
keys:
  - name: team-a
    key_sha256: {key_digest(KEY_A)}
    read: ["team_a", "shared"]
    write: ["team_a", "shared"]
    admin: ["team_a"]
    groups: ["team-a"]
  - name: team-b
    key: {KEY_B}
    read: ["team_b", "shared"]
    write: ["team_b", "shared"]
    admin: ["team_b"]
    groups: ["team-b"]
  - name: reader
    key: {KEY_READER}
    read: ["shared"]
""" + ops_key(KEY_OPS)

DOCS = {
    "team_a": [("alpha.md", f"The Falcon launch code of team A is {SECRET_A}.", None)],
    "team_b": [("beta.md", f"The Osprey budget code of team B is {SECRET_B}.", None)],
    "shared": [
        ("a-plan.md", f"Team A plan: the Kestrel migration codename is {SECRET_A}.", ["team-a"]),
        ("b-plan.md", f"Team B plan: the Heron rollout codename is {SECRET_B}.", ["team-b"]),
        ("handbook.md", "The office opens at nine and the rollout codename is public.", None),
    ],
}
QUESTION_B = "What is the Heron rollout codename in b-plan.md?"


@dataclass
class Gateway:
    url: GatewayUrl
    keys: Path
    log: Path
    prompts: Path  # the generator's prompt log: every prompt it received, a JSON line each

    def as_(self, key: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)


@pytest.fixture(scope="module")
def generator(suite, tmp_path_factory) -> Iterator[tuple[str, Path]]:  # type: ignore[no-untyped-def]
    """A generator of this module's own that logs the prompts it receives: (target, log)."""
    tmp = tmp_path_factory.mktemp("access-generator")
    prompts = tmp / "prompts.jsonl"
    env = {"RAGRAIL_GENERATOR_PROMPT_LOG_FILE": str(prompts)}
    with grpc_service("services.generator", "GENERATOR", env, tmp / "generator.log") as target:
        yield str(target), prompts


@pytest.fixture(scope="module", params=["milvus", "faiss"])
def gw(request, generator, tmp_path_factory) -> Iterator[Gateway]:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp(f"access-{request.param}")
    keys = tmp / "keys.yaml"
    keys.write_text(KEY_FILE)
    log = tmp / "gateway.log"
    generator_url, prompts = generator
    with (
        _retriever(request.param, tmp) as retriever_url,
        gateway_process(
            log,
            api_keys_file=str(keys),
            retriever_url=retriever_url,
            generator_url=generator_url,
        ) as url,
    ):
        gateway = Gateway(url, keys, log, prompts)
        _seed(gateway)
        yield gateway
        ops = gateway.as_(KEY_OPS)
        for name in DOCS:
            ops.delete(f"/v1/collections/{name}")


def _retriever(backend: str, tmp: Path):  # type: ignore[no-untyped-def]
    """The suite's retriever (Milvus Lite), or a FAISS one of this module's own."""
    import contextlib
    import os

    if backend == "milvus":
        return contextlib.nullcontext(os.environ["RAGRAIL_GATEWAY_RETRIEVER_URL"])

    @contextlib.contextmanager
    def faiss() -> Iterator[str]:
        env = {
            "RAGRAIL_RETRIEVER_BACKEND": "faiss",
            "RAGRAIL_RETRIEVER_FAISS_DIR": str(tmp / "faiss"),
            "RAGRAIL_RETRIEVER_PORT": str(free_port()),
        }
        with grpc_service("services.retriever", "RETRIEVER", env, tmp / "retriever.log") as t:
            yield str(t)

    return faiss()


def _seed(gateway: Gateway) -> None:
    ops = gateway.as_(KEY_OPS)
    for name, docs in DOCS.items():
        ops.delete(f"/v1/collections/{name}")  # a module run before may have left it
        assert ops.post("/v1/collections", json={"name": name}).status_code == 201
        for doc_id, text, groups in docs:
            metadata = {"access_groups": groups} if groups is not None else {}
            body = {"collection": name, "documents": [{"id": doc_id, "name": doc_id, "text": text,
                                                       "metadata": metadata}]}  # fmt: skip
            reply = ops.post("/v1/documents", json=body)
            assert reply.status_code == 200, reply.text


def _error(reply: httpx.Response) -> dict[str, Any]:
    return reply.json()["error"]


def _hidden(reply: httpx.Response, name: str) -> None:
    """A refusal that reads exactly like a collection that does not exist."""
    assert reply.status_code == 404, reply.text
    assert _error(reply)["message"] == (
        f"collection '{name}' does not exist; create it with POST /v1/collections"
    )


# -- collections ---------------------------------------------------------------------------


def test_collections_list_only_readable_ones(gw: Gateway) -> None:
    def names(key: str) -> set[str]:
        reply = gw.as_(key).get("/v1/collections")
        assert reply.status_code == 200
        return {c["name"] for c in reply.json()["collections"]}

    assert names(KEY_A) & set(DOCS) == {"team_a", "shared"}
    assert names(KEY_B) & set(DOCS) == {"team_b", "shared"}
    assert names(KEY_READER) & set(DOCS) == {"shared"}
    assert names(KEY_OPS) >= set(DOCS)


def test_every_route_on_another_teams_collection_is_a_404(gw: Gateway) -> None:
    a = gw.as_(KEY_A)
    chat = {"model": "any", "messages": [{"role": "user", "content": "budget?"}], "max_tokens": 8}
    attempts = [
        a.get("/v1/collections/team_b"),
        a.delete("/v1/collections/team_b"),
        a.get("/v1/documents", params={"collection": "team_b"}),
        a.delete("/v1/documents/beta.md", params={"collection": "team_b"}),
        a.post("/v1/documents", json={"collection": "team_b",
                                      "documents": [{"name": "x.md", "text": "planted"}]}),
        a.post("/v1/documents", data={"collection": "team_b"},
               files=[("files", ("x.md", b"planted"))]),
        a.post("/v1/ingest/jobs", json={"collection": "team_b",
                                        "documents": [{"name": "x.md", "text": "planted"}]}),
        a.post("/v1/search", json={"collection": "team_b", "query": "budget"}),
        a.post("/v1/chat/completions", json={**chat, "collection": "team_b"}),
        a.post("/v1/chat/completions", json={**chat, "collection_names": ["team_a", "team_b"]}),
    ]  # fmt: skip
    for reply in attempts:
        _hidden(reply, "team_b")
    # The same answer as a name that does not exist at all.
    _hidden(a.get("/v1/collections/team_zzz"), "team_zzz")
    # Team B's data is intact.
    listed = gw.as_(KEY_B).get("/v1/documents", params={"collection": "team_b"}).json()
    assert [d["id"] for d in listed["documents"]] == ["beta.md"]


def test_scopes_below_admin_and_write_are_403(gw: Gateway) -> None:
    a, reader = gw.as_(KEY_A), gw.as_(KEY_READER)
    assert a.post("/v1/collections", json={"name": "team_b_new"}).status_code == 403
    assert a.post("/v1/collections", json={"name": "shared"}).status_code == 403
    assert a.delete("/v1/collections/shared").status_code == 403
    # A read-only key cannot ingest, into the collection or as a job, nor delete a document.
    doc = {"collection": "shared", "documents": [{"name": "r.md", "text": "read only"}]}
    for reply in (
        reader.post("/v1/documents", json=doc),
        reader.post("/v1/ingest/jobs", json=doc),
        reader.delete("/v1/documents/handbook.md", params={"collection": "shared"}),
    ):
        assert reply.status_code == 403, reply.text
        assert "may not write to collection 'shared'" in _error(reply)["message"]
    assert gw.as_(KEY_OPS).get("/v1/collections/shared").json()["num_documents"] == 3


def test_keys_are_checked_on_the_model_routes(gw: Gateway) -> None:
    body = {"input": "x", "model": "any"}
    for key, status in ((None, 401), ("rr-not-a-key", 401), (KEY_READER, 200)):
        assert gw.as_(key).post("/v1/embeddings", json=body).status_code == status
        assert gw.as_(key).get("/v1/models").status_code == status


# -- document-level access -----------------------------------------------------------------


def _texts(reply: httpx.Response) -> list[str]:
    assert reply.status_code == 200, reply.text
    return [h["text"] for h in reply.json()["hits"]]


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
@pytest.mark.parametrize(
    "flt",
    [
        None,
        {"document_id": "b-plan.md"},
        {"document_id": {"$in": ["b-plan.md", "a-plan.md"]}},
        {"document_id": {"$nin": ["a-plan.md", "handbook.md"]}},
        {"access_groups": {"$any": ["team-b"]}},
        {"access_groups": {"$unset_or_any": ["team-b"]}},
        {"access_groups": {"$nin": ["team-a"]}},
        {"$and": [{"access_groups": {"$unset_or_any": ["team-b", "team-a"]}}]},
    ],
)
def test_search_never_returns_another_groups_chunk(
    gw: Gateway, mode: str, flt: dict[str, Any] | None
) -> None:
    body = {"collection": "shared", "query": f"Heron rollout codename {SECRET_B}", "mode": mode,
            "top_k": 10, "filter": flt}  # fmt: skip
    texts = _texts(gw.as_(KEY_A).post("/v1/search", json=body))
    assert not any(SECRET_B in t for t in texts)
    # The reader (no group) sees only documents with no access list.
    assert all("handbook" in t or "office" in t for t in _texts(gw.as_(KEY_READER).post(
        "/v1/search", json=body)))  # fmt: skip
    if flt is None:
        assert any(SECRET_A in t for t in texts)  # its own group's document is found
        ops = _texts(gw.as_(KEY_OPS).post("/v1/search", json=body))
        assert any(SECRET_B in t for t in ops)  # and the chunk is there to be found


def test_a_filter_with_or_is_refused(gw: Gateway) -> None:
    body = {"collection": "shared", "query": "codename",
            "filter": {"$or": [{"document_id": "b-plan.md"}, {"access_groups": None}]}}  # fmt: skip
    reply = gw.as_(KEY_A).post("/v1/search", json=body)
    assert reply.status_code == 422 and "$or is not available" in _error(reply)["message"]


def test_documents_list_only_visible_ones(gw: Gateway) -> None:
    def ids(key: str) -> list[str]:
        reply = gw.as_(key).get("/v1/documents", params={"collection": "shared"})
        assert reply.status_code == 200
        assert reply.json()["total"] == len(reply.json()["documents"])
        return [d["id"] for d in reply.json()["documents"]]

    assert ids(KEY_A) == ["a-plan.md", "handbook.md"]
    assert ids(KEY_B) == ["b-plan.md", "handbook.md"]
    assert ids(KEY_READER) == ["handbook.md"]
    # Another group's document cannot be deleted, nor replaced by ingesting its id.
    a = gw.as_(KEY_A)
    assert a.delete("/v1/documents/b-plan.md", params={"collection": "shared"}).status_code == 404
    doc = {"collection": "shared", "documents": [{"id": "b-plan.md", "name": "b", "text": "x"}]}
    assert a.post("/v1/documents", json=doc).status_code == 403
    assert ids(KEY_B) == ["b-plan.md", "handbook.md"]


def test_ingest_cannot_hand_documents_to_another_group(gw: Gateway) -> None:
    a = gw.as_(KEY_A)
    doc = {"collection": "shared", "documents": [{"name": "gift.md", "text": "planted"}]}
    for groups in (["team-b"], ["team-a", "team-b"]):
        reply = a.post("/v1/documents", json={**doc, "metadata": {"access_groups": groups}})
        assert reply.status_code == 403 and "team-b" in _error(reply)["message"]
    reply = a.post("/v1/documents", json={**doc, "metadata": {"access_groups": "team-a"}})
    assert reply.status_code == 422
    nine = {"access_groups": [f"g{i}" for i in range(9)]}
    reply = gw.as_(KEY_OPS).post("/v1/documents", json={**doc, "metadata": nine})
    assert reply.status_code == 422 and "at most 8" in _error(reply)["message"], reply.text
    form = {"collection": "shared", "metadata": json.dumps({"access_groups": ["team-b"]})}
    reply = a.post("/v1/documents", data=form, files=[("files", ("gift.md", b"planted"))])
    assert reply.status_code == 403


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_naming_another_groups_document_cannot_reach_it(gw: Gateway, stream: bool) -> None:
    body = {
        "model": "any",
        "messages": [{"role": "user", "content": QUESTION_B}],
        "collection": "shared",
        "filter": {"document_id": "b-plan.md"},
        "max_tokens": 24,
        "temperature": 0,
        "stream": stream,
        "answer_mode": "generative",
        "evidence_selection": False,
        "enable_grounding": False,
    }
    for extra in ({}, {"filter": None}):
        reply = gw.as_(KEY_A).post("/v1/chat/completions", json={**body, **extra})
        assert reply.status_code == 200, reply.text
        # The model may echo the question's file name; never the document's text or a source.
        assert SECRET_B not in reply.text
        if not stream:
            cited = {c["document_id"] for c in reply.json()["citations"]}
            assert "b-plan.md" not in cited


def _chat_prompts(gw: Gateway, key: str, question: str, stream: bool, **extra: Any) -> list[str]:
    """The prompts the generator received for one chat (the module's chats run one at a
    time, and only this module's gateways use its generator)."""
    before = gw.prompts.stat().st_size if gw.prompts.exists() else 0
    body = {
        "model": "any",
        "messages": [{"role": "user", "content": question}],
        "collection": "shared",
        "max_tokens": 8,
        "temperature": 0,
        "stream": stream,
        "answer_mode": "generative",
        "evidence_selection": False,
        "enable_grounding": False,
        **extra,
    }
    reply = gw.as_(key).post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    with gw.prompts.open("rb") as log:
        log.seek(before)
        prompts = [json.loads(line)["prompt"] for line in log.read().splitlines()]
    assert prompts, "the chat reached no generator"
    return prompts


@pytest.mark.parametrize("stream", [False, True])
def test_the_generator_never_receives_another_groups_chunk(gw: Gateway, stream: bool) -> None:
    """Read where the model reads it: the prompt the generator received."""
    b_texts = [SECRET_B, DOCS["team_b"][0][1], DOCS["shared"][1][1]]
    widest = {"vdb_top_k": 20, "reranker_top_k": 20}
    for extra in ({"filter": {"document_id": "b-plan.md"}}, {}, widest):
        for prompt in _chat_prompts(gw, KEY_A, QUESTION_B, stream, **extra):
            assert not [t for t in b_texts if t in prompt], prompt
    # The log does show what retrieval put in front of the model: team A's own plan, and
    # team B's plan for a key that may see it, reach the prompt for the same kind of question.
    own = _chat_prompts(gw, KEY_A, "What is the Kestrel migration codename in a-plan.md?", stream)
    assert any(SECRET_A in prompt for prompt in own)
    assert any(SECRET_B in prompt for prompt in _chat_prompts(gw, KEY_OPS, QUESTION_B, stream))


# -- jobs, audit, reload -------------------------------------------------------------------


def test_another_teams_job_is_a_404(gw: Gateway) -> None:
    a, b = gw.as_(KEY_A), gw.as_(KEY_B)
    doc = {"collection": "team_a", "documents": [{"name": "job.md", "text": "a job of team A"}]}
    job = a.post("/v1/ingest/jobs", json=doc)
    assert job.status_code == 202, job.text
    job_id = job.json()["id"]
    for reply in (b.get(f"/v1/ingest/jobs/{job_id}"), b.delete(f"/v1/ingest/jobs/{job_id}")):
        assert reply.status_code == 404
        assert _error(reply)["message"].startswith(f"no ingest job '{job_id}'")
    assert job_id not in b.get("/v1/ingest/jobs").text
    assert job_id in a.get("/v1/ingest/jobs").text
    assert a.get(f"/v1/ingest/jobs/{job_id}").status_code == 200


def test_audit_lines_and_denial_counters_name_keys_never_show_them(gw: Gateway) -> None:
    a = gw.as_(KEY_A)
    _hidden(a.get("/v1/collections/team_b"), "team_b")
    doc = {"collection": "team_a", "documents": [{"name": "audit.md", "text": "audited"}]}
    assert a.post("/v1/documents", json=doc).status_code == 200
    gw.as_("rr-stolen-key-0000").get("/v1/collections")
    metrics = httpx.get(f"{gw.url}/metrics").text
    assert 'ragrail_gateway_access_denied_total{key_name="team-a",reason="no_read"}' in metrics
    assert 'key_name="unknown",reason="unknown_key"' in metrics
    time.sleep(0.2)
    text = gw.log.read_text()
    for key in (KEY_A, KEY_B, KEY_READER, KEY_OPS, "rr-stolen-key-0000"):
        assert key not in text
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    audit = [e for e in lines if e.get("logger") == "ragrail.audit"]
    denied = next(e for e in audit if e["audit"] == "denied" and e["key_name"] == "team-a")
    expected = {"route": "GET /v1/collections/{name}", "collection": "team_b", "reason": "no_read"}
    assert expected.items() <= denied.items() and denied["outcome"] == "denied"
    writes = [e for e in audit if e["audit"] == "write" and e["key_name"] == "team-a"]
    expected = {"route": "POST /v1/documents", "collection": "team_a", "outcome": 200}
    assert any(expected.items() <= e.items() for e in writes)


def test_a_key_removed_from_the_file_is_refused_within_a_second_of_sighup(gw: Gateway) -> None:
    b = gw.as_(KEY_B)
    assert b.get("/v1/collections").status_code == 200
    without_b = KEY_FILE.replace(f"    key: {KEY_B}\n", "    key: rr-team-b-rotated-000\n")
    assert without_b != KEY_FILE
    try:
        gw.keys.write_text(without_b)
        gw.url.process.send_signal(signal.SIGHUP)
        sent = time.monotonic()
        while b.get("/v1/collections").status_code != 401:
            assert time.monotonic() - sent < 1.0, "the removed key still works 1 s after SIGHUP"
            time.sleep(0.02)
        assert gw.as_("rr-team-b-rotated-000").get("/v1/collections").status_code == 200
        assert gw.as_(KEY_A).get("/v1/collections").status_code == 200
        # A broken file keeps the keys in use.
        gw.keys.write_text("keys:\n  - name: [broken\n")
        gw.url.process.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        assert gw.as_(KEY_A).get("/v1/collections").status_code == 200
    finally:
        gw.keys.write_text(KEY_FILE)
        gw.url.process.send_signal(signal.SIGHUP)
        time.sleep(0.3)
    assert gw.url.process.poll() is None
    assert b.get("/v1/collections").status_code == 200
