"""`ragrail up --train` where no reader is found (neither trained nor published) trains the
extractive reader in the background once no guard model is
training (a real trainer process, on tiny arguments through RAGRAIL_READER_TRAIN_ARGS), writes
it where the gateway looks (tests/gateway/test_reader_pickup.py shows the gateway taking it
up), and says so; a configured reader, or `--no-train`, trains nothing."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

import pytest

from ragrail.launcher import (
    READER_TRAIN_ARGS_ENV,
    READER_TRAIN_LOG,
    READER_TRAINING,
    Supervisor,
    needs_reader_training,
    reader_out,
    training_command,
)
from shared.models import registry
from tests.trainers.reader_tiny import TINY_READER_ARGS

# In tmp_path, no models/ there nor a published reader, no RAGRAIL_* settings (a session
# fixture may have configured a model).
pytestmark = pytest.mark.usefixtures("no_models")


def test_the_reader_is_trained_after_the_guard_model_and_registered(tmp_path: Path) -> None:
    assert needs_reader_training()
    assert reader_out() == tmp_path / "models" / "reader" / "minilm-covidqa" / "v1"
    os.environ[READER_TRAIN_ARGS_ENV] = shlex.join(TINY_READER_ARGS)
    try:
        said: list[str] = []
        supervisor = Supervisor(tmp_path / "data", said.append, train=True)
        # The guard model's training runs first: one training at a time.
        supervisor.training = supervisor._spawn(["sleep", "1"], "train-guardrails.log")
        supervisor.start_reader_training()
        assert supervisor.reader_training is None and not supervisor.reader_checked
        supervisor.training.process.wait()
        supervisor.training.outcome = "done"
        supervisor.start_reader_training()
        training = supervisor.reader_training
        assert training is not None and training.running
        deadline = time.monotonic() + 300
        while training.running:
            assert time.monotonic() < deadline, "the tiny reader within 300 s"
            supervisor.follow_reader_training()
            time.sleep(0.5)
    finally:
        del os.environ[READER_TRAIN_ARGS_ENV]
        supervisor.down()
    log = tmp_path / "data" / "logs" / READER_TRAIN_LOG
    assert training.outcome == "done", log.read_text()[-3000:]
    found = registry.entries("reader")
    assert [e.path.resolve() for e in found] == [reader_out()]
    assert any(s.startswith("training the extractive reader") and str(log) in s for s in said)
    assert any(s.startswith("extractive reader trained in") for s in said), said
    # Trained: a second start trains nothing.
    assert not needs_reader_training()


def test_a_configured_reader_or_no_train_trains_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGRAIL_GATEWAY_CHAT_READER_MODEL", "none")
    assert not needs_reader_training()
    monkeypatch.delenv("RAGRAIL_GATEWAY_CHAT_READER_MODEL")
    supervisor = Supervisor(tmp_path / "data", print, train=False)
    supervisor.start_reader_training()
    assert supervisor.reader_checked and supervisor.reader_training is None
    # The trainer reads the data shipped in the repository by default.
    command = training_command(tmp_path / "out", READER_TRAINING)
    assert command[command.index("-m") + 1] == "trainers.reader"
    assert command[-3:] == ["--out", str(tmp_path / "out"), "--overwrite"]
