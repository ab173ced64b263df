"""The launcher restarts a killed service and counts it on its own /metrics (real processes)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import httpx
import pytest

from ragrail.launcher import RESTARTS, start_metrics
from shared.clients import grpc_serving
from tests.conftest import Suite


def test_a_killed_service_is_restarted_and_counted(
    suite: Suite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGRAIL_LAUNCHER_METRICS_PORT", "0")
    port = start_metrics(print)
    assert port > 0
    before = RESTARTS.labels("retriever", "restarted")._value.get()

    child = suite.supervisor.child("retriever")
    old_pid = child.process.pid
    stop = asyncio.Event()
    loop = asyncio.new_event_loop()
    watcher = threading.Thread(
        target=loop.run_until_complete, args=(suite.supervisor.watch(stop),), daemon=True
    )
    watcher.start()
    try:
        os.kill(old_pid, signal.SIGKILL)
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, "the retriever did not come back"
            if child.process.pid != old_pid and asyncio.run(grpc_serving(child.url)):
                break
            time.sleep(0.3)
    finally:
        loop.call_soon_threadsafe(stop.set)
        watcher.join(timeout=10)
        loop.close()

    assert RESTARTS.labels("retriever", "restarted")._value.get() == before + 1
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    assert 'ragrail_launcher_restarts_total{action="restarted",service="retriever"}' in text
    # The suite still searches after the restart.
    reply = suite.http.post("/v1/search", json={"query": "anything", "collection": "none_such"})
    assert reply.status_code in (200, 404)
