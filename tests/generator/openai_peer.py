"""llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`) on the packaged
SmolLM2 GGUF, as a process on a loopback port: the real model server the openai engine is
tested and benchmarked against (no mock). One request slot, as that server has; it is started
with `--interrupt_requests false` (by default a new request cuts the running answer short)
and llama.cpp's flash attention, as the in-process llamacpp engine runs, so greedy answers
can be compared token for token."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.conftest import REPO, free_port, stop_process

MODEL_ALIAS = "smollm2"


def server_missing() -> str:
    """Why llama-cpp-python's server cannot run here, or "" when it can."""
    try:
        import llama_cpp.server.app  # noqa: F401 - the `server` extra's imports
    except ImportError as exc:
        return f"llama-cpp-python's server extra is not installed ({exc}); run make install"
    return ""


@dataclass
class LlamaServer:
    """One llama_cpp.server process; `start` again after `kill` serves on the same port."""

    gguf: Path
    log: Path
    n_ctx: int = 1024
    threads: int = 1
    api_key: str = ""
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """What RAGRAIL_GENERATOR_REMOTE_URL is set to."""
        return f"{self.base}/v1"

    def command(self) -> list[str]:
        args = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.gguf),
            "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.threads),
            "--n_threads_batch", str(self.threads),
            "--flash_attn", "true",
            "--interrupt_requests", "false",
            "--verbose", "false",
        ]  # fmt: skip
        if self.api_key:
            args += ["--api_key", self.api_key]
        return args

    def start(self, timeout: float = 60.0) -> None:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}  # its log, as it goes
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command(), cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited:\n{self.log.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/models", headers=headers, timeout=2).is_success:
                    return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server not answering after {timeout} s; see {self.log}")

    def kill(self) -> None:
        """SIGKILL: the server dies mid-answer, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, timeout=10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def llama_server(gguf: Path, log: Path, **options: object) -> Iterator[LlamaServer]:
    server = LlamaServer(gguf, log, **options)  # type: ignore[arg-type]
    server.start()
    try:
        yield server
    finally:
        server.stop()
