"""Fixtures that start the real services as processes on free loopback ports.

The `suite` fixture runs embedder, retriever and gateway once per test session through the
same Supervisor `ragrail up` uses; tests talk gRPC and HTTP to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.ports import free_port

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


TINY_BEIR = REPO / "tests" / "fixtures" / "beir_tiny"
# Seconds on 2 cores: 8 queries x (1 positive + 2 BM25 negatives), 64 tokens, one epoch.
TINY_RERANKER_TRAINING = [
    "--data", str(TINY_BEIR), "--max-queries", "8", "--negatives", "2", "--max-length", "64",
    "--epochs", "1", "--batch-size", "8", "--eval-max-queries", "4", "--seed", "7",
    "--export-onnx",
]  # fmt: skip


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """A directory this test run's pytest-xdist workers share (a model the tests train),
    made by `build(path)` once: the first worker to ask builds it while the others wait on
    its lock, then find it done. Two workers training the same tiny model doubled the
    suite's costliest fixtures."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = root / "built" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    done = out.parent / f"{name}.done"
    with (out.parent / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)  # a build that failed half-way
            build(out)
            done.touch()
    return out


@pytest.fixture(scope="session")
def tiny_reranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reranker trained by `python -m trainers.reranker` on tests/fixtures/beir_tiny, with
    model.onnx (seconds)."""
    out = built_once(tmp_path_factory, "reranker-tiny", train_tiny_reranker)
    assert (out / "model.onnx").is_file() and (out / "config.json").is_file()
    return out


def train_tiny_reranker(out: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    done = subprocess.run(
        [sys.executable, "-m", "trainers.reranker", *TINY_RERANKER_TRAINING, "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"training failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def run_module(
    module: str, env: dict[str, str], timeout: float = 120, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    """`python -m <module>` to its end (a service that must refuse to start), with `env` on
    top of a RAGRAIL_-free environment, from `cwd` (the checkout); its output captured."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
    full.update(HF_HUB_OFFLINE="1", **env)
    return subprocess.run(
        [sys.executable, "-m", module],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a service process a test starts: this one's without its RAGRAIL_*
    settings (a session fixture may have set some), offline, tokenizers single-threaded, and
    `extra` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.update(extra)
    return env


def start_module(module: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`python -m <module>` from the checkout with exactly `env`, its output (both streams)
    written to `log`; returns at once (the caller waits for it to serve)."""
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", module],
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


class Target(str):
    """A service's host:port, with the process serving it (tests that stop it mid-run)."""

    process: subprocess.Popen[bytes]


def stop_process(process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """SIGTERM, `timeout` seconds to drain, then SIGKILL."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_processes(processes: list[subprocess.Popen[bytes]], timeout: float = 30) -> None:
    """SIGTERM to all at once (they drain together), then each gets `timeout` seconds before
    SIGKILL."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_grpc_serving(
    process: subprocess.Popen[bytes],
    target: str,
    log: Path,
    what: str,
    timeout: float,
    poll_s: float,
) -> None:
    """Until the server at `target` reports SERVING; the test fails, naming `what`, when the
    process exits (with its log's tail) or after `timeout` seconds."""
    from shared.clients import grpc_serving

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what} exited:\n{log.read_text()[-3000:]}")
        if asyncio.run(grpc_serving(target)):
            return
        time.sleep(poll_s)
    pytest.fail(f"{what} not serving after {timeout} s")


@contextlib.contextmanager
def grpc_service(module: str, prefix: str, env: dict[str, str], log: Path) -> Iterator[Target]:
    """Runs `python -m <module>` with `env` on top of a RAGRAIL_-free environment, on free
    ports (`RAGRAIL_<prefix>_PORT`, metrics too), until its gRPC health check says SERVING;
    yields its target and stops it afterwards. Its output goes to `log`. A port given in `env`
    is kept (a service started again where its clients look for it)."""
    from shared.clients import grpc_serving

    port = int(env.get(f"RAGRAIL_{prefix}_PORT") or free_port())
    full = clean_env(
        **{
            f"RAGRAIL_{prefix}_PORT": str(port),
            f"RAGRAIL_{prefix}_METRICS_PORT": str(free_port()),
            f"RAGRAIL_{prefix}_LOG_FORMAT": "text",
        }
    )
    full.update(env)  # the caller's settings win, the port settings above included
    process = start_module(module, full, log)
    target = Target(f"127.0.0.1:{port}")
    target.process = process

    try:
        deadline = time.monotonic() + 120
        while not asyncio.run(grpc_serving(target)):
            assert process.poll() is None, f"{module} exited:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"not serving:\n{log.read_text()[-3000:]}"
            time.sleep(0.3)
        yield target
    finally:
        stop_process(process)


class GatewayUrl(str):
    """A gateway's URL that also holds its process (for tests that signal it)."""

    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def gateway_process(log: Path | None = None, **settings: str) -> Iterator[GatewayUrl]:
    """A gateway process of its own with some settings changed (RAGRAIL_GATEWAY_<NAME>), the
    rest from this process's environment (the suite's services, inside a test using it);
    yields its URL (with `.process`) once it answers. Its output goes to `log`, or nowhere."""
    import httpx

    port = free_port()
    overrides = {f"RAGRAIL_GATEWAY_{k.upper()}": v for k, v in settings.items()}
    sink = log.open("wb") if log else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "services.gateway"],
        cwd=REPO,
        env={**os.environ, "RAGRAIL_GATEWAY_PORT": str(port), **overrides},
        stdout=sink,
        stderr=subprocess.STDOUT,
    )
    url = GatewayUrl(f"http://127.0.0.1:{port}")
    url.process = process
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "the gateway exited" + (
                f":\n{log.read_text()[-3000:]}" if log else ""
            )
            try:
                httpx.get(f"{url}/v1/health", timeout=5)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the gateway did not answer within 60 s"
                time.sleep(0.1)
        yield url
    finally:
        stop_process(process)
        if log:
            sink.close()  # type: ignore[union-attr]


def chat_reply(url: str, question: str, **body: object) -> dict:
    """The gateway at `url` asked one user `question` (POST /v1/chat/completions, greedy, with
    `body` on top); the reply must be a 200, and its JSON is returned."""
    reply = httpx.post(
        f"{url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": question}], "temperature": 0, **body},
        timeout=300,
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


def ops_key(key: str) -> str:
    """A gateway key file's entry (YAML, services/gateway/README.md, Multi-user) for an
    operator's `key`: every right on every collection, in every group."""
    return f"""  - name: ops
    key: {key}
    read: ["*"]
    write: ["*"]
    admin: ["*"]
    groups: ["*"]
"""


def stand_in_model(path: Path, *files: str) -> Path:
    """`path` made (parents too) with each of `files` in it holding `{}`: a model, as far as
    a check for its files goes."""
    path.mkdir(parents=True)
    for name in files:
        (path / name).write_text("{}")
    return path


@pytest.fixture
def no_models(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The test runs in its tmp_path, where there is no models/, with none of this process's
    RAGRAIL_* settings (a session fixture may have set some) and no published models: what
    `ragrail up` finds is what the test puts there."""
    for key in [k for k in os.environ if k.startswith("RAGRAIL_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGRAIL_PUBLISHED_DIR", "none")


def suite_env(data_dir: Path) -> dict[str, str]:
    """RAGRAIL_* variables giving every service its own free ports and data under data_dir."""
    env = {"RAGRAIL_RETRIEVER_MILVUS_URI": str(data_dir / "ragrail.db")}
    # The suite runs without a reranker whatever models/ this checkout has trained.
    env["RAGRAIL_RERANKER_MODELS_DIR"] = str(data_dir / "models" / "reranker")
    for name in ("embedder", "retriever", "reranker", "generator", "guardrails"):
        env[f"RAGRAIL_{name.upper()}_PORT"] = str(free_port())
        env[f"RAGRAIL_{name.upper()}_METRICS_PORT"] = str(free_port())
    env["RAGRAIL_GATEWAY_PORT"] = str(free_port())
    env["RAGRAIL_GATEWAY_EMBEDDER_URL"] = f"127.0.0.1:{env['RAGRAIL_EMBEDDER_PORT']}"
    env["RAGRAIL_GATEWAY_RETRIEVER_URL"] = f"127.0.0.1:{env['RAGRAIL_RETRIEVER_PORT']}"
    env["RAGRAIL_GATEWAY_GENERATOR_URL"] = f"127.0.0.1:{env['RAGRAIL_GENERATOR_PORT']}"
    env["RAGRAIL_GATEWAY_MAX_REQUEST_MB"] = "2"
    # The suite runs without rails wherever it runs (`suite` starts it as `ragrail up
    # --no-rails`: a developer's models/guardrails/ would otherwise put the gateway's chat
    # behind them); tests/guardrails starts that service on its own.
    return env


class Suite:
    def __init__(self, supervisor, env: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
        self.supervisor = supervisor
        self.env = env
        self.gateway_url = supervisor.child("gateway").url
        self.http = httpx.Client(base_url=self.gateway_url, timeout=120)

    def target(self, name: str) -> str:
        return self.supervisor.child(name).url

    def ingest_sample(self, collection: str, *, new: bool = True) -> None:
        """The packaged sample corpus uploaded into `collection`, made here (`new`: it must
        not exist yet; else it may, from an earlier module)."""
        from ragrail.sample import SAMPLE_CORPUS

        reply = self.http.post("/v1/collections", json={"name": collection})
        assert reply.status_code in ((201,) if new else (201, 409)), reply.text
        files = [("files", (p.name, p.read_bytes())) for p in sorted(SAMPLE_CORPUS.iterdir())]
        reply = self.http.post("/v1/documents", data={"collection": collection}, files=files)
        assert reply.status_code == 200, reply.text

    def restart(self, name: str) -> None:
        """Stops one service with SIGTERM and starts it again, waiting until it serves."""
        child = self.supervisor.child(name)
        assert child.process is not None
        child.process.terminate()
        child.process.wait(timeout=30)
        self.supervisor.start(child)
        asyncio.run(self.supervisor.wait_ready(child))


@pytest.fixture(scope="session")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    from ragrail.launcher import Supervisor

    data_dir = tmp_path_factory.mktemp("suite")
    env = suite_env(data_dir)
    # The services start with the suite's own RAGRAIL_* variables only, from the checkout:
    # the first test to ask for the suite (which one depends on how xdist shares out the
    # files) may have set variables or changed directory for itself.
    saved = {k: v for k, v in os.environ.items() if k.startswith("RAGRAIL_")}
    for key in saved:
        del os.environ[key]
    os.environ.update(env)
    # No first-start training: tests train the tiny models they need themselves.
    supervisor = Supervisor(data_dir, print, rails=False, train=False)
    try:
        with contextlib.chdir(REPO):
            asyncio.run(supervisor.up())
        yield Suite(supervisor, env)
    finally:
        supervisor.down()
        for key in env:
            os.environ.pop(key, None)
        os.environ.update(saved)
