"""Which services `ragrail up` starts, and how it wires the gateway to them (no processes)."""

from pathlib import Path

import pytest

from ragrail.launcher import Supervisor


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no models/reranker/ here
    for key in ("RAGRAIL_RERANKER_MODEL", "RAGRAIL_GATEWAY_RERANKER_URL", "RAGRAIL_CONFIG"):
        monkeypatch.delenv(key, raising=False)


def test_without_a_reranker_model_the_suite_runs_without_reranking(tmp_path: Path) -> None:
    said: list[str] = []
    supervisor = Supervisor(tmp_path / "data", said.append)
    names = [c.spec.name for c in supervisor.children]
    assert names == ["embedder", "retriever", "generator", "gateway"]
    assert "RAGRAIL_GATEWAY_RERANKER_URL" not in supervisor.child("gateway").env
    assert any("not starting reranker" in s for s in said)


def test_a_trained_reranker_is_started_and_the_gateway_pointed_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "models" / "reranker" / "minilm" / "v1"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    monkeypatch.setenv("RAGRAIL_RERANKER_PORT", "50999")
    supervisor = Supervisor(tmp_path / "data", print)
    names = [c.spec.name for c in supervisor.children]
    assert names == ["embedder", "retriever", "reranker", "generator", "gateway"]
    assert supervisor.child("gateway").env["RAGRAIL_GATEWAY_RERANKER_URL"] == "127.0.0.1:50999"
