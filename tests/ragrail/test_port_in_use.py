"""A service whose port another process holds stops at once, with a message naming the port
and the setting that moves it (not a traceback, not a hang)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import REPO
from tests.ports import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def held_port() -> Iterator[int]:
    with socket.socket() as holder:
        port = free_port()
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
        yield port


def start_retriever(tmp_path, **ports: int) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
    env.update(
        RAGRAIL_RETRIEVER_BACKEND="faiss",
        RAGRAIL_RETRIEVER_FAISS_DIR=str(tmp_path / "faiss"),
        RAGRAIL_RETRIEVER_PORT=str(ports.get("port") or free_port()),
        RAGRAIL_RETRIEVER_METRICS_PORT=str(ports.get("metrics_port") or free_port()),
    )
    return subprocess.run(
        [sys.executable, "-m", "services.retriever"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_taken_grpc_port_names_the_port_and_the_setting(tmp_path, held_port: int) -> None:  # type: ignore[no-untyped-def]
    done = start_retriever(tmp_path, port=held_port)
    assert done.returncode != 0
    assert f"cannot bind 127.0.0.1:{held_port}: another process holds the port" in done.stderr
    assert "RAGRAIL_RETRIEVER_PORT" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_taken_metrics_port_names_the_port_and_the_setting(tmp_path, held_port: int) -> None:  # type: ignore[no-untyped-def]
    done = start_retriever(tmp_path, metrics_port=held_port)
    assert done.returncode != 0
    assert f"cannot serve metrics on 127.0.0.1:{held_port}" in done.stderr
    assert "RAGRAIL_RETRIEVER_METRICS_PORT" in done.stderr
    assert "Traceback" not in done.stderr
