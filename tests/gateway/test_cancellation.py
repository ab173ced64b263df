"""A client that leaves stops the work it asked for: a non-streamed chat stops generating and an
ingest stops embedding (and stores nothing), measured from the generator's and embedder's own
metrics, against the real services."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

pytestmark = pytest.mark.integration
STOP_WITHIN_S = 1.0


def _metric(url: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in httpx.get(url, timeout=10).text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _metrics_url(suite, service: str) -> str:  # type: ignore[no-untyped-def]
    return f"http://127.0.0.1:{suite.env[f'RAGRAIL_{service.upper()}_METRICS_PORT']}/metrics"


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> float:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, f"{what}: not within {timeout} s"
        time.sleep(0.02)
    return time.monotonic() - start


def _wait_cancelled(metrics: str, method: str, before: float, service: str) -> None:
    """Until the service whose metrics are at `metrics` has counted a `method` call cancelled
    since it counted `before` of them (10 s at most)."""
    _wait(
        lambda: _metric(metrics, "ragrail_grpc_cancelled_total", method=method) > before,
        10,
        f"the {service} saw the call cancelled",
    )


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _send(suite, path: str, body: dict) -> socket.socket:  # type: ignore[no-untyped-def]
    """A request sent on a raw connection, so that the test decides when the client leaves."""
    url = urlsplit(suite.gateway_url)
    payload = json.dumps(body).encode()
    conn = socket.create_connection((url.hostname, url.port))
    conn.sendall(
        f"POST {path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    return conn


def test_a_non_streamed_chat_stops_generating_when_its_client_leaves(suite) -> None:  # type: ignore[no-untyped-def]
    generator = _metrics_url(suite, "generator")
    gateway = f"{suite.gateway_url}/metrics"
    cancelled = _metric(generator, "ragrail_grpc_cancelled_total", method="Generate")
    left_before = _metric(gateway, "ragrail_chat_requests_total", outcome="cancelled")
    conn = _send(
        suite,
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "Write a very long story about bees."}],
            "max_tokens": 1500,
            "temperature": 0,
        },
    )

    def running() -> float:
        return _metric(generator, "ragrail_generator_running_requests")

    _wait(lambda: running() > 0, 120, "generation started")
    time.sleep(0.5)  # well into decoding
    conn.close()
    left = time.monotonic()
    _wait_cancelled(generator, "Generate", cancelled, "generator")
    _wait(lambda: running() == 0, 10, "the generator stopped")
    stopped = time.monotonic() - left
    # And it is idle: no decoding going on in a thread the cancellation did not reach.
    pid = suite.supervisor.child("generator").process.pid
    busy = _cpu_seconds(pid)
    time.sleep(1)
    assert _cpu_seconds(pid) - busy < 0.2, "the generator is still busy"
    print(f"generation stopped {stopped:.3f} s after the client left")
    assert stopped < STOP_WITHIN_S
    _wait(
        lambda: _metric(gateway, "ragrail_chat_requests_total", outcome="cancelled") > left_before,
        5,
        "the gateway counted the chat as cancelled",
    )
    assert _metric(gateway, "ragrail_http_failures_total", status="499", type="ClientDisconnected")


def test_an_abandoned_ingest_stops_embedding_and_stores_nothing(suite) -> None:  # type: ignore[no-untyped-def]
    embedder = _metrics_url(suite, "embedder")
    assert suite.http.post("/v1/collections", json={"name": "abandoned"}).status_code == 201
    cancelled = _metric(embedder, "ragrail_grpc_cancelled_total", method="Embed")
    tokenized = _metric(embedder, "ragrail_grpc_requests_total", method="Tokenize")
    text = " ".join(
        f"Sentence {i} is about bees, flowers and the waggle dance." for i in range(1500)
    )
    conn = _send(
        suite,
        "/v1/documents",
        {
            "collection": "abandoned",
            "documents": [{"name": f"d{i}.txt", "text": text} for i in range(4)],
        },
    )

    def embedding() -> bool:  # tokenized, and a call (Embed) in flight
        return _metric(embedder, "ragrail_grpc_requests_total", method="Tokenize") > tokenized and (
            _metric(embedder, "ragrail_grpc_in_flight_requests", service="embedder") > 0
        )

    _wait(embedding, 120, "embedding started")
    conn.close()
    left = time.monotonic()
    _wait_cancelled(embedder, "Embed", cancelled, "embedder")
    _wait(
        lambda: _metric(embedder, "ragrail_grpc_in_flight_requests", service="embedder") == 0,
        10,
        "the embedder stopped",
    )
    stopped = time.monotonic() - left
    print(f"embedding stopped {stopped:.3f} s after the client left")
    assert stopped < STOP_WITHIN_S
    time.sleep(1)
    listed = suite.http.get("/v1/documents", params={"collection": "abandoned"}).json()
    assert listed["total"] == 0, "an abandoned ingest stored documents"
