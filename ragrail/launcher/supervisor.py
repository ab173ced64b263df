"""The Supervisor: starts the services, restarts one that exits, runs a first start's
training and stops everything, gateway first."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ragrail.launcher.metrics import RESTARTS
from ragrail.launcher.models import (
    guard_model_out,
    guard_model_problem,
    needs_guard_training,
    needs_reader_training,
    reader_out,
)
from ragrail.launcher.services import SERVICES, Child, is_ready
from ragrail.launcher.training import (
    GUARD_TRAINING,
    READER_TRAINING,
    FirstStartTraining,
    Training,
    training_command,
)
from shared.models import registry
from shared.models.guard import GUARD_ROLE
from shared.models.reader import ROLE as READER_ROLE
from shared.topology import endpoint

READY_TIMEOUT_S = 180.0
STOP_GRACE_S = 15.0


def log_tail(path: Path, lines: int = 12) -> str:
    """The last lines of a child's log: the cause of an exit, where the error is read."""
    try:
        text = path.read_text(errors="replace")
    except OSError as err:
        return f"(unreadable: {err})"
    return "\n".join(f"  {line}" for line in text.splitlines()[-lines:]) or "  (empty)"


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
                    f"starting; see {child.log_path}, which ends:\n{log_tail(child.log_path)}"
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
        missing = (
            "no guard model found, neither trained under "
            f"{registry.models_root() / GUARD_ROLE} nor published (RAGRAIL_PUBLISHED_DIR): the "
            "rails on it let everything through until one is there; `ragrail train guardrails "
            "--all`, or `ragrail up --train`"
        )
        self.training = self._train(GUARD_TRAINING, guard_model_out(), missing) or self.training

    def _train(self, recipe: FirstStartTraining, out: Path, missing: str) -> Training | None:
        """Starts `recipe`'s training to `out` and says so, if `ragrail up --train` asked for
        it; else says `missing` (what is not there, how to train it) and returns None."""
        if not self.train:
            self.say(missing)
            return None
        training = self._spawn(training_command(out, recipe), recipe.log)
        self.say(
            f"training {recipe.what} ({recipe.minutes} minutes on 2 cores; log: "
            f"{training.log_path}); until then {recipe.meanwhile}"
        )
        return training

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
        missing = (
            "no extractive reader found, neither trained under "
            f"{registry.models_root() / READER_ROLE} nor published: "
            f"{READER_TRAINING.meanwhile}; `ragrail train reader`, or `ragrail up --train`"
        )
        started = self._train(READER_TRAINING, reader_out(), missing)
        self.reader_training = started or self.reader_training

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
