"""Which services `ragrail up` starts, and how it wires the gateway to them (no processes)."""

import json
from pathlib import Path

import pytest

from ragrail.launcher import Supervisor


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no models/reranker/ here
    # MODELS_DIR too: the session's `suite` fixture, when an earlier test started it, points
    # it at the suite's own empty directory, which would hide tmp_path/models/reranker.
    for key in (
        "RAGRAIL_RERANKER_MODEL",
        "RAGRAIL_RERANKER_MODELS_DIR",
        "RAGRAIL_GATEWAY_RERANKER_URL",
        "RAGRAIL_CONFIG",
    ):
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


def _trained(root: Path, version: str, after: float, bm25: float) -> Path:
    model = root / "models" / "reranker" / "minilm" / version
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    metrics = {"ndcg@10": {"bm25": bm25, "before": 0.2, "after": after}}
    (model / "metrics.json").write_text(json.dumps(metrics))
    return model


def test_a_trained_reranker_worse_than_bm25_is_not_started_unless_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _trained(tmp_path, "v1", after=0.333, bm25=0.789)
    said: list[str] = []
    supervisor = Supervisor(tmp_path / "data", said.append)
    assert "reranker" not in [c.spec.name for c in supervisor.children]
    reason = next(s for s in said if "not starting reranker" in s)
    assert "ranks worse than BM25" in reason and "0.333 against 0.789" in reason
    assert "RAGRAIL_RERANKER_MODEL" in reason

    monkeypatch.setenv("RAGRAIL_RERANKER_MODEL", str(model))  # the user's explicit choice
    assert "reranker" in [c.spec.name for c in Supervisor(tmp_path / "d2", print).children]


def test_a_trained_reranker_better_than_bm25_is_started(tmp_path: Path) -> None:
    _trained(tmp_path, "v2", after=0.801, bm25=0.789)
    assert "reranker" in [c.spec.name for c in Supervisor(tmp_path / "data", print).children]
