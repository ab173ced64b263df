"""`ragrail up`, `ingest` and `search` as a user runs them, in real processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, suite_env

pytestmark = pytest.mark.integration
RAGRAIL = [sys.executable, "-m", "ragrail.cli"]


def _ragrail(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`ragrail <args>` to its end (60 s at most), its output captured."""
    return subprocess.run([*RAGRAIL, *args], env=env, capture_output=True, text=True, timeout=60)


def _wait_for(proc: subprocess.Popen[str], text: str, lines: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline() if proc.stdout else ""
        if line:
            lines.append(line)
            if text in line:
                return
        elif proc.poll() is not None:
            break
    raise AssertionError(f"'{text}' not seen; output so far:\n{''.join(lines)}")


def _children(supervisor_pid: int) -> dict[str, int]:
    """Service name -> pid of the `python -m services.<name>` children of the supervisor."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout
    found = {}
    for row in out.splitlines()[1:]:
        pid, ppid, args = row.split(None, 2)
        for name in ("embedder", "retriever", "gateway"):
            if int(ppid) == supervisor_pid and f"-m services.{name}" in args:
                found[name] = int(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_up_serves_sample_restarts_a_dead_service_and_stops_cleanly(tmp_path: Path) -> None:
    env = {**os.environ, **suite_env(tmp_path), "COLUMNS": "200"}
    proc = subprocess.Popen(
        # What `make up` runs on a fresh clone: every rail on the published guard model, answers
        # from the published reader, nothing trained.
        [*RAGRAIL, "up", "--sample", "--data-dir", str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    pids: dict[str, int] = {}
    try:
        _wait_for(proc, "ragrail is up", lines, timeout_s=240)
        output = "".join(lines)
        published = REPO / "published"
        assert f"every rail on, guard model {published / 'guardrails'}" in output, output
        assert f"answers: extractive reader {published / 'reader'}" in output, output
        # Nothing is trained on a first start.
        assert "training the guard model" not in output, output
        assert "training the extractive reader" not in output, output
        for stage in ("start", "ingest", "answer"):
            assert re.search(rf"^\s*{stage}  .* in \d+\.\d s$", output, re.M), (stage, output)
        assert "honeybee-colonies.md" in output, output  # the demo search answered from the sample
        # ... and the demo question was answered through /v1/chat/completions, with sources
        assert "ask: how do honeybees" in output and "[1] honeybee-colonies.md" in output, output
        gateway = f"http://127.0.0.1:{env['RAGRAIL_GATEWAY_PORT']}"

        search = _ragrail(
            "search", "Mars rover landing", "--collection", "sample", "--gateway", gateway, env=env
        )
        assert search.returncode == 0, search.stdout + search.stderr
        assert "mars-rovers.html" in search.stdout

        extra = tmp_path / "extra"
        extra.mkdir()
        (extra / "kilns.md").write_text("# Kilns\nA kiln fires clay into stoneware at 1200 C.\n")
        ingest = _ragrail(
            "ingest", str(extra), "--collection", "extra", "--gateway", gateway, env=env
        )
        assert ingest.returncode == 0, ingest.stdout + ingest.stderr
        assert "ingested 1 documents" in ingest.stdout

        # Kill the embedder outright: the supervisor restarts it; the others keep serving.
        pids = _children(proc.pid)
        assert set(pids) == {"embedder", "retriever", "gateway"}
        os.kill(pids["embedder"], signal.SIGKILL)
        docs = httpx.get(f"{gateway}/v1/documents", params={"collection": "sample"}, timeout=10)
        assert docs.status_code == 200  # retriever and gateway unaffected
        _wait_for(proc, "embedder is back", lines, timeout_s=120)
        pids = _children(proc.pid)
        assert len(pids) == 3 and _alive(pids["embedder"])
        reply = httpx.post(
            f"{gateway}/v1/search",
            timeout=30,
            json={"query": "kiln stoneware", "collection": "extra"},
        )
        assert reply.status_code == 200 and reply.json()["hits"][0]["document_name"] == "kilns.md"
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(lines) + rest
    assert "stopped." in rest
    assert not [n for n, pid in pids.items() if _alive(pid)], "services left running after Ctrl-C"


def test_search_against_a_missing_gateway_says_how_to_fix_it() -> None:
    result = _ragrail("status", "--gateway", "http://127.0.0.1:9")
    assert result.returncode == 1
    assert "ragrail up" in result.stdout


def test_rails_summary_names_the_chunks_the_retrieval_rails_changed() -> None:
    from ragrail.show import rails_summary

    report = {
        "enabled": True,
        "input": {"verdict": "allow", "rail": "", "reason": ""},
        # the gateway's GuardrailsReport.retrieval entries name a chunk by chunk_id
        "retrieval": [
            {"chunk_id": "abc-000001", "verdict": "block", "rail": "injection", "reason": "x"},
            {"chunk_id": "abc-000002", "verdict": "modify", "rail": "mask pii", "reason": ""},
        ],
        "output": {"verdict": "block", "rail": "self check", "reason": "unsafe"},
    }
    assert rails_summary(report) == (
        "output block by self check (unsafe); retrieval block chunk abc-000001 by injection; "
        "retrieval modify chunk abc-000002 by mask pii"
    )
    assert rails_summary({"enabled": True, "retrieval": []}) == "all passed"
    assert rails_summary({"enabled": False}) == "off"


def test_the_http_client_imports_neither_the_gateway_nor_grpc() -> None:
    code = (
        "import sys, ragrail.client; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'services')); "
        "assert not bad, bad; "
        "from shared.formats import SUPPORTED; "
        "assert ragrail.client.SUPPORTED is SUPPORTED"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
