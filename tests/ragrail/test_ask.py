"""`ragrail ask` as a user runs it: a real process against the suite's gateway, embedder,
retriever and generator (llama.cpp on SmolLM2-135M)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

pytestmark = pytest.mark.integration
RAGRAIL = [sys.executable, "-m", "ragrail.cli"]
COLLECTION = "ask"
BEES = "How do honeybees tell each other where the flowers are?"
SHORT = ["--max-tokens", "24", "--temperature", "0"]
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def gateway(suite: Any) -> str:  # type: ignore[no-untyped-def]
    suite.ingest_sample(COLLECTION)
    return suite.gateway_url


def _ask(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RAGRAIL, "ask", *args], env=ENV, capture_output=True, text=True, timeout=300
    )


def test_answer_streams_then_sources_and_rails(gateway: str) -> None:
    # --no-rails: with output rails on, the gateway holds the answer back until they pass it
    # (chat_stream_output_rails=buffer), so it would arrive whole wherever a suite has rails.
    args = [BEES, "--collection", COLLECTION, "--url", gateway, "-k", "2", "--no-rails", *SHORT]
    proc = subprocess.Popen(
        [*RAGRAIL, "ask", *args],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None
    # Each read returns what the command has flushed so far: a streamed answer arrives over
    # several reads before the sources, which come only once the answer is complete.
    reads: list[tuple[float, bytes]] = []
    while piece := os.read(proc.stdout.fileno(), 65536):
        reads.append((time.monotonic(), piece))
    assert proc.wait(timeout=60) == 0, b"".join(p for _, p in reads).decode()
    output = b"".join(p for _, p in reads).decode()
    before_sources = [p for _, p in reads if b"Sources" not in p]
    assert len(before_sources) >= 2, f"the answer came in one piece: {reads}"

    answer, _, rest = output.partition("\nSources\n")
    assert answer.strip(), output
    assert "[1] honeybee-colonies.md" in rest and "(score " in rest, output
    sources = [line for line in rest.splitlines() if line.startswith("  [")]
    assert 1 <= len(sources) <= 2, output  # -k 2: two chunks at most were offered
    assert "Guardrails: " in rest, output
    assert "total " in rest and " ms" in rest, output


def test_without_the_knowledge_base_no_sources(gateway: str) -> None:
    result = _ask("Say hello.", "--no-kb", "--url", gateway, *SHORT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() and "Sources" not in result.stdout
    assert "Guardrails: " in result.stdout


def test_unknown_collection_is_the_gateways_message(gateway: str) -> None:
    result = _ask(BEES, "--collection", "no_such_collection", "--url", gateway)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error:" in result.stdout and "no_such_collection" in result.stdout, result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_gateway_down_says_how_to_fix_it() -> None:
    result = _ask(BEES, "--url", "http://127.0.0.1:9")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not reachable" in result.stdout and "ragrail up" in result.stdout, result.stdout
    assert "Traceback" not in result.stdout + result.stderr
