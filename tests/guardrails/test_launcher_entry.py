"""`ragrail up` starts the guardrails service only when its classifier exists, and says why
not otherwise (the reranker's pattern)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragrail.launcher import SERVICES, guardrails_not_startable


def test_guardrails_is_a_launched_service() -> None:
    spec = next(s for s in SERVICES if s.name == "guardrails")
    assert spec.module == "services.guardrails" and spec.kind == "grpc"
    assert spec.not_startable is guardrails_not_startable


def test_left_out_without_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no models/guardrails/ here
    monkeypatch.delenv("RAGRAIL_GUARDRAILS_INJECTION_MODEL", raising=False)
    reason = guardrails_not_startable()
    assert "python -m trainers.guardrails" in reason


def test_started_with_the_newest_trained_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAGRAIL_GUARDRAILS_INJECTION_MODEL", raising=False)
    model = tmp_path / "models" / "guardrails" / "tiny" / "v1"
    model.mkdir(parents=True)
    (model / "head.json").write_text("{}")
    assert guardrails_not_startable() == ""
    monkeypatch.setenv("RAGRAIL_GUARDRAILS_INJECTION_MODEL", str(tmp_path / "missing"))
    assert "python -m trainers.guardrails" in guardrails_not_startable()
