"""A real embeddings and /rerank server for tests and benches: infinity (`infinity-emb`) in its
own environment, .venv-infinity (`make infinity-env`), serving local model directories on a
loopback port with OpenAI's API under /v1 (/v1/models, /v1/embeddings, /v1/rerank).

    with infinity_server({"minilm": packaged_minilm()}) as server:
        server.url  # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.ports import free_port

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-infinity"
EXECUTABLE = VENV / "bin" / "infinity_emb"
START_TIMEOUT_S = 120.0


@dataclass
class InfinityServer:
    url: str  # the API's base, ending in /v1
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    api_key: str = ""


def missing() -> str:
    """Why the server cannot start here ("" when it can)."""
    if not EXECUTABLE.is_file():
        return f"{EXECUTABLE} is missing: run `make infinity-env`"
    return ""


def start(models: dict[str, Path], log: Path, **options: Any) -> InfinityServer:
    """Starts infinity serving each model directory under its name and waits until /v1/models
    answers (`launch`'s options)."""
    server = launch(models, log, **options)
    wait_ready(server)
    return server


def launch(
    models: dict[str, Path], log: Path, *, api_key: str = "", port: int = 0, threads: int = 0
) -> InfinityServer:
    """Starts infinity serving each model directory under its name, without waiting for it
    (`wait_ready`), so other processes can start meanwhile. `threads`: torch threads of the
    server (0 leaves its default)."""
    if missing():
        raise RuntimeError(missing())
    port = port or free_port()
    command = [str(EXECUTABLE), "v2", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--url-prefix", "/v1", "--engine", "torch", "--device", "cpu"]
    command += ["--no-model-warmup"]  # its warm-up measures timings for half a minute
    for name, path in models.items():
        command += ["--model-id", str(path), "--served-model-name", name]
    if api_key:
        command += ["--api-key", api_key]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGRAIL_", "VIRTUAL_ENV"))}
    env.update(HF_HUB_OFFLINE="1", DO_NOT_TRACK="1", INFINITY_ANONYMOUS_USAGE_STATS="0")
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    return InfinityServer(f"http://127.0.0.1:{port}/v1", port, process, log, api_key)


def launch_for_tests(
    models: dict[str, Path], log: Path, *, api_key: str
) -> Iterator[InfinityServer]:
    """The body of a module fixture (`yield from`): infinity launching, stopped at teardown.
    Where it is missing the test fails rather than skips: `make infinity-env` is part of the
    test environment."""
    import pytest

    if missing():
        pytest.fail(missing())
    server = launch(models, log, api_key=api_key)
    yield server
    stop(server)


def wait_ready(server: InfinityServer) -> None:
    """Until /v1/models answers; stops the server and raises if it exits or takes too long."""
    deadline = time.monotonic() + START_TIMEOUT_S
    key = server.api_key
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            code = server.process.returncode
            raise RuntimeError(f"infinity exited with {code}:\n{tail(server.log)}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.url}/models", headers=headers, timeout=2).is_success:
                return
        time.sleep(0.3)
    stop(server)
    raise RuntimeError(f"infinity did not answer in {START_TIMEOUT_S:.0f} s:\n{tail(server.log)}")


def stop(server: InfinityServer) -> None:
    if server.process.poll() is not None:
        return
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def tail(log: Path, chars: int = 3000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.is_file() else ""


@contextlib.contextmanager
def infinity_server(
    models: dict[str, Path], log: Path, **options: object
) -> Iterator[InfinityServer]:
    server = start(models, log, **options)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        stop(server)
