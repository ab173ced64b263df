"""`ragrail up` always starts the guardrails service (the rails on the guard model pending
until it is trained), trains the guard model when none is trained or configured, and leaves
the service out only with --no-rails (no processes here; tests/ragrail/test_guard_training.py
runs a training)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from ragrail.launcher import (
    SERVICES,
    TRAIN_ARGS_ENV,
    Supervisor,
    guard_model_out,
    guard_model_problem,
    needs_guard_training,
    training_command,
)
from tests.conftest import stand_in_model

# In tmp_path, no models/ there nor a published one, no RAGRAIL_* settings.
pytestmark = pytest.mark.usefixtures("no_models")


def test_guardrails_is_a_launched_service() -> None:
    spec = next(s for s in SERVICES if s.name == "guardrails")
    assert spec.module == "services.guardrails" and spec.kind == "grpc"
    assert spec.not_startable() == ""


def test_started_without_a_model_and_training_planned(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "data", print)
    assert "guardrails" in [c.spec.name for c in supervisor.children]
    assert supervisor.child("gateway").env["RAGRAIL_GATEWAY_GUARDRAILS_URL"]
    assert needs_guard_training()
    assert guard_model_out() == tmp_path / "models" / "guardrails" / "guard-minilm" / "v1"


def test_no_rails_leaves_the_service_out_and_says_so(tmp_path: Path) -> None:
    said: list[str] = []
    supervisor = Supervisor(tmp_path / "data", said.append, rails=False)
    assert "guardrails" not in [c.spec.name for c in supervisor.children]
    assert supervisor.child("gateway").env["RAGRAIL_GATEWAY_GUARDRAILS_URL"] == ""
    assert any("--no-rails" in s and "without rails" in s for s in said)
    supervisor.start_training()
    assert supervisor.training is None


def test_a_trained_or_configured_model_is_not_trained_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = stand_in_model(tmp_path / "models" / "guardrails" / "guard-minilm" / "v0", "guard.json")
    assert needs_guard_training()  # no manifest: an interrupted training, trained again
    (model / "manifest.json").write_text(json.dumps({"created_at": "2031-01-01T00:00:00"}))
    assert not needs_guard_training()

    model.joinpath("manifest.json").unlink()
    monkeypatch.setenv("RAGRAIL_GUARDRAILS_INJECTION_MODEL", str(tmp_path))
    assert not needs_guard_training()


def test_a_configured_model_that_is_missing_stops_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert guard_model_problem() == ""
    monkeypatch.setenv("RAGRAIL_GUARDRAILS_GUARD_MODEL", str(tmp_path / "missing"))
    assert "RAGRAIL_GUARDRAILS_GUARD_MODEL" in guard_model_problem()
    assert not needs_guard_training()
    with pytest.raises(RuntimeError, match="guardrails cannot start"):
        asyncio.run(Supervisor(tmp_path / "data", print).up())


def test_training_arguments_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"

    def trainer_part(command: list[str]) -> list[str]:
        assert command[command.index("-m") - 1] == sys.executable
        return command[command.index("trainers.guardrails") + 1 :]

    assert trainer_part(training_command(out)) == [
        "--all", "--seed", "0", "--out", str(out), "--overwrite",
    ]  # fmt: skip
    monkeypatch.setenv(TRAIN_ARGS_ENV, "--all --tiny --epochs 1")
    assert trainer_part(training_command(out)) == [
        "--all", "--tiny", "--epochs", "1", "--out", str(out), "--overwrite",
    ]  # fmt: skip
