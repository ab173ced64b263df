"""Which services `ragrail up` starts, and how it wires the gateway to them (no processes)."""

import json
import os
from pathlib import Path

import pytest

from ragrail.launcher import SERVICES, Supervisor
from shared.topology import SERVICES as TOPOLOGY
from tests.conftest import stand_in_model


@pytest.fixture(autouse=True)
def isolated(no_models: None) -> None:
    """Every test here sees only the models it puts in its tmp_path."""


def test_without_a_reranker_model_the_suite_runs_without_reranking(tmp_path: Path) -> None:
    said: list[str] = []
    supervisor = Supervisor(tmp_path / "data", said.append)
    names = [c.spec.name for c in supervisor.children]
    assert names == ["embedder", "retriever", "generator", "guardrails", "gateway"]
    assert "RAGRAIL_GATEWAY_RERANKER_URL" not in supervisor.child("gateway").env
    assert any("not starting reranker" in s for s in said)


def test_a_trained_reranker_is_started_and_the_gateway_pointed_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in_model(tmp_path / "models" / "reranker" / "minilm" / "v1", "config.json")
    monkeypatch.setenv("RAGRAIL_RERANKER_PORT", "50999")
    supervisor = Supervisor(tmp_path / "data", print)
    names = [c.spec.name for c in supervisor.children]
    assert names == ["embedder", "retriever", "reranker", "generator", "guardrails", "gateway"]
    assert supervisor.child("gateway").env["RAGRAIL_GATEWAY_RERANKER_URL"] == "127.0.0.1:50999"


def _trained(root: Path, version: str, after: float, bm25: float) -> Path:
    model = stand_in_model(root / "models" / "reranker" / "minilm" / version, "config.json")
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


def test_a_registry_manifest_is_the_evaluation_when_metrics_json_is_missing(
    tmp_path: Path,
) -> None:
    """Trainers record their metrics in manifest.json too; the gate reads them there."""
    model = stand_in_model(tmp_path / "models" / "reranker" / "minilm" / "v3", "config.json")
    manifest = {
        "role": "reranker",
        "created_at": "2031-01-01T00:00:00+00:00",
        "metrics": {"ndcg@10": {"bm25": 0.7, "after": 0.6}},
    }
    (model / "manifest.json").write_text(json.dumps(manifest))
    said: list[str] = []
    supervisor = Supervisor(tmp_path / "data", said.append)
    assert "reranker" not in [c.spec.name for c in supervisor.children]
    assert any("0.600 against 0.700, manifest.json" in s for s in said)


def test_ports_come_from_the_environment_and_the_yaml_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ragrail up` reads each service's host and port as the service does (shared.topology),
    without importing the service."""
    for key in [k for k in os.environ if k.startswith("RAGRAIL_")]:
        monkeypatch.delenv(key)  # a session fixture may have set ports
    config = tmp_path / "ragrail.yaml"
    config.write_text("embedder:\n  port: 50111\n  batch_size: 8\ngateway:\n  host: 0.0.0.0\n")
    monkeypatch.setenv("RAGRAIL_CONFIG", str(config))
    monkeypatch.setenv("RAGRAIL_RETRIEVER_PORT", "50222")
    supervisor = Supervisor(tmp_path / "data", print)
    assert (supervisor.child("embedder").host, supervisor.child("embedder").port) == (
        "127.0.0.1",
        50111,
    )
    assert supervisor.child("retriever").port == 50222
    assert supervisor.child("gateway").url == "http://0.0.0.0:8080"
    assert supervisor.child("generator").port == 50055
    assert [s.name for s in SERVICES] == list(TOPOLOGY)
