"""A real Triton server for the triton engine's tests: the tritonserver binary nvidia-pytriton
ships, run on CPU by tests/generator/triton_peer/serve.py under .venv-pytriton.

Its model repository holds two decoupled Python models with TensorRT-LLM's tensors, both
generating with llama.cpp on the packaged SmolLM2 GGUF (triton_peer/peer_llm.py):

- `tensorrt_llm`: deploy/triton's own config.pbtxt and model.yaml (the llmapi model's
  tensors), with triton_peer/llmapi_model.py as its model.py;
- `ensemble`: triton_peer/ensemble.pbtxt (the inflight_batcher_llm ensemble's tensors), with
  triton_peer/ensemble_model.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import REPO, free_port, stop_process

PEER = REPO / "tests" / "generator" / "triton_peer"
DEPLOY_MODEL = REPO / "deploy" / "triton" / "model_repository" / "tensorrt_llm"
# `make test` creates it (Makefile target pytriton-env); PYTRITON_PYTHON names another.
PYTRITON_PYTHON = Path(os.environ.get("PYTRITON_PYTHON", REPO / ".venv-pytriton/bin/python"))


def pytriton_missing() -> str | None:
    """Why these tests cannot run here (no PyTriton environment), or None when they can. An
    environment that exists but is broken is a failure, not a reason to skip."""
    if PYTRITON_PYTHON.is_file():
        probe = subprocess.run(
            [str(PYTRITON_PYTHON), "-c", "import pytriton, llama_cpp, yaml"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert probe.returncode == 0, (
            f"{PYTRITON_PYTHON} cannot import pytriton, llama_cpp and yaml; recreate it with "
            f"`make pytriton-env`:\n{probe.stderr[-1500:]}"
        )
        return None
    why = (
        f"no PyTriton environment at {PYTRITON_PYTHON.parent.parent} (nvidia-pytriton pins "
        "numpy<2, so it lives outside .venv); `make pytriton-env` creates it"
    )
    # `make test` (and so CI) creates it: missing there is a broken install, not a skip.
    assert not os.environ.get("CI"), why
    return why


def model_repository(root: Path) -> Path:
    """The repository the server loads, assembled under `root`."""
    repo = root / "model_repository"
    llmapi = repo / "tensorrt_llm"
    (llmapi / "1").mkdir(parents=True)
    shutil.copy(DEPLOY_MODEL / "config.pbtxt", llmapi / "config.pbtxt")
    shutil.copy(DEPLOY_MODEL / "1" / "model.yaml", llmapi / "1" / "model.yaml")
    shutil.copy(PEER / "llmapi_model.py", llmapi / "1" / "model.py")
    ensemble = repo / "ensemble"
    (ensemble / "1").mkdir(parents=True)
    shutil.copy(PEER / "ensemble.pbtxt", ensemble / "config.pbtxt")
    shutil.copy(PEER / "ensemble_model.py", ensemble / "1" / "model.py")
    # The Python backend puts only a model's own directory on sys.path.
    for model in (llmapi, ensemble):
        shutil.copy(PEER / "peer_llm.py", model / "1" / "peer_llm.py")
    return repo


@dataclass
class TritonPeer:
    url: str  # gRPC host:port
    http_port: int
    events: Path
    log: Path
    process: subprocess.Popen[bytes]

    def events_for(self, request_id: str, timeout: float = 30.0) -> dict[str, Any]:
        """The model's record of a finished request, waiting for it to finish."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.events.is_file():
                for line in self.events.read_text(encoding="utf-8").splitlines():
                    event = json.loads(line)
                    if event["request_id"] == request_id:
                        return dict(event)
            time.sleep(0.1)
        raise AssertionError(f"Triton's model never finished request {request_id!r}")

    def alive(self) -> bool:
        return self.process.poll() is None


def wait_ready(peer: TritonPeer, models: tuple[str, ...], timeout: float) -> None:
    import tritonclient.grpc as triton

    client = triton.InferenceServerClient(peer.url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            assert peer.alive(), f"the Triton server exited:\n{peer.log.read_text()[-4000:]}"
            try:
                if client.is_server_ready() and all(client.is_model_ready(m) for m in models):
                    return
            except Exception:  # not listening yet
                pass
            time.sleep(0.5)
    finally:
        client.close()
    raise AssertionError(f"Triton not ready after {timeout} s:\n{peer.log.read_text()[-4000:]}")


@contextmanager
def triton_peer(root: Path, gguf: Path) -> Iterator[TritonPeer]:
    """The server on free loopback ports until the block ends."""
    grpc_port, http_port = free_port(), free_port()
    events, log = root / "events.jsonl", root / "tritonserver.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
    env.update(PEER_GGUF=str(gguf), PEER_EVENTS=str(events))
    command = [
        str(PYTRITON_PYTHON),
        str(PEER / "serve.py"),
        "--repository",
        str(model_repository(root)),
        "--grpc-port",
        str(grpc_port),
        "--http-port",
        str(http_port),
        "--metrics-port",
        str(free_port()),
        "--workspace",
        str(root / "workspace"),
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    peer = TritonPeer(f"127.0.0.1:{grpc_port}", http_port, events, log, process)
    try:
        wait_ready(peer, ("tensorrt_llm", "ensemble"), timeout=240)
        yield peer
    finally:
        stop_process(process, timeout=60)
