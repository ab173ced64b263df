"""A service whose port another process holds stops at once, with a message naming the port
and the setting that moves it (not a traceback, not a hang)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.conftest import run_module
from tests.ports import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def held_port() -> Iterator[int]:
    with socket.socket() as holder:
        port = free_port()
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
        yield port


@pytest.mark.parametrize(
    ("which", "message", "setting"),
    [
        ("port", "cannot bind 127.0.0.1:{port}: another process holds the port", "PORT"),
        ("metrics_port", "cannot serve metrics on 127.0.0.1:{port}", "METRICS_PORT"),
    ],
)
def test_a_taken_port_names_the_port_and_the_setting(  # type: ignore[no-untyped-def]
    tmp_path, held_port: int, which: str, message: str, setting: str
) -> None:
    ports = {"port": str(free_port()), "metrics_port": str(free_port()), which: str(held_port)}
    done = run_module(
        "services.retriever",
        {
            "RAGRAIL_RETRIEVER_BACKEND": "faiss",
            "RAGRAIL_RETRIEVER_FAISS_DIR": str(tmp_path / "faiss"),
            "RAGRAIL_RETRIEVER_PORT": ports["port"],
            "RAGRAIL_RETRIEVER_METRICS_PORT": ports["metrics_port"],
        },
    )
    assert done.returncode != 0
    assert message.format(port=held_port) in done.stderr
    assert f"RAGRAIL_RETRIEVER_{setting}" in done.stderr
    assert "Traceback" not in done.stderr
