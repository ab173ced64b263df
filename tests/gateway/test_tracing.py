"""OpenTelemetry: with OTEL_TRACES_EXPORTER=console the gateway writes a span per request and
per chat stage, and the services it calls continue the caller's trace (traceparent metadata)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx
import pytest

from tests.conftest import gateway_process, grpc_service

pytestmark = pytest.mark.integration
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def spans(log: Path) -> dict[str, set[str]]:
    """Span name -> the trace ids it appears in, from the console exporter's JSON in a log."""
    found: dict[str, set[str]] = {}
    pattern = r'"name": "([^"]+)",\s*"context": \{\s*"trace_id": "0x([0-9a-f]{32})"'
    for name, trace_id in re.findall(pattern, log.read_text()):
        found.setdefault(name, set()).add(trace_id)
    return found


def test_a_trace_runs_from_the_gateway_into_the_services(suite, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    reply = suite.http.post("/v1/collections", json={"name": "traced"})
    assert reply.status_code == 201, reply.text
    reply = suite.http.post(
        "/v1/documents",
        json={"collection": "traced", "documents": [{"name": "bees.md", "text": "Bees dance."}]},
    )
    assert reply.status_code == 200, reply.text

    embedder_log, gateway_log = tmp_path / "embedder.log", tmp_path / "gateway.log"
    with grpc_service(
        "services.embedder", "EMBEDDER", {"OTEL_TRACES_EXPORTER": "console"}, embedder_log
    ) as embedder:
        os.environ["OTEL_TRACES_EXPORTER"] = "console"
        try:
            with gateway_process(gateway_log, embedder_url=embedder) as url:
                headers = {"traceparent": TRACEPARENT}
                body = {"query": "how do bees talk", "collection": "traced"}
                search = httpx.post(f"{url}/v1/search", json=body, headers=headers, timeout=60)
                assert search.status_code == 200, search.text
                chat = httpx.post(
                    f"{url}/v1/chat/completions",
                    json={
                        "messages": [{"role": "user", "content": "How do bees talk?"}],
                        "collection": "traced",
                        "max_tokens": 4,
                    },
                    timeout=120,
                )
                assert chat.status_code == 200, chat.text
        finally:
            del os.environ["OTEL_TRACES_EXPORTER"]

    gateway, service = spans(gateway_log), spans(embedder_log)
    assert gateway["POST /v1/search"] == {TRACE_ID}  # the caller's trace continued
    (chat_trace,) = gateway["POST /v1/chat/completions"]  # a new trace: no traceparent sent
    assert chat_trace != TRACE_ID
    # ... into the embedder, over gRPC metadata, for both requests
    assert service["embedder/Embed"] == {TRACE_ID, chat_trace}
    for stage in ("chat.retrieval", "chat.prompt", "chat.generation"):
        assert gateway.get(stage) == {chat_trace}, f"{stage}: {sorted(gateway)}"
