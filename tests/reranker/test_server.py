"""The reranker on a tiny model the test trains: both backends in process, then the service as
real processes (PyTorch and onnx) over gRPC: order, top_n, threshold, errors, Info, health."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2

from services.reranker.backends import load_backend, model_dir
from services.reranker.settings import RerankerSettings
from shared.errors import FailedPrecondition
from shared.models.cross_encoder import newest_reranker
from shared.proto.ragrail.v1 import common_pb2, reranker_pb2, reranker_pb2_grpc
from tests.conftest import (
    REPO,
    clean_env,
    free_port,
    run_module,
    start_module,
    stop_processes,
    wait_grpc_serving,
)
from tests.grpc_calls import health_and_services, unary

MAX_PASSAGES = 40
MAX_TEXT_CHARS = 5000
BACKENDS = ("sentence-transformers", "onnx")

QUERY = "how do honeybees tell each other where flowers are"
TEXTS = [
    "TCP opens a connection with a three-way handshake of SYN, SYN-ACK and ACK.",
    "Forager honeybees dance on the comb to show the direction and distance of flowers.",
    "Sourdough rises because wild yeast ferments the sugars in flour.",
    "Bumblebees shiver to warm their flight muscles before foraging on cold days.",
    "The Rhine flows from the Swiss Alps to the North Sea.",
    "Bees " + "and flowers " * 200,  # longer than 64 tokens: truncated
    "Honeybee colonies collapse when workers vanish and leave the queen behind.",
]


@pytest.fixture(scope="session")
def tiny_model(tiny_reranker: Path) -> Path:
    return tiny_reranker


# -- backends in process -------------------------------------------------------------------


def test_onnx_scores_equal_pytorch_scores(tiny_model: Path) -> None:
    settings = RerankerSettings(model=str(tiny_model), batch_size=3)  # several batches
    torch_scores = load_backend(settings).score(QUERY, TEXTS)
    onnx_backend = load_backend(settings.model_copy(update={"backend": "onnx"}))
    onnx_scores = onnx_backend.score(QUERY, TEXTS)
    assert torch_scores.shape == onnx_scores.shape == (len(TEXTS),)
    assert torch_scores.dtype == onnx_scores.dtype == np.float32
    assert np.allclose(torch_scores, onnx_scores, atol=1e-3), (torch_scores, onnx_scores)
    assert ((onnx_scores > 0) & (onnx_scores < 1)).all()  # sigmoid, as CrossEncoder.predict
    # Scores do not depend on batching or on the other passages of the request.
    alone = np.array([onnx_backend.score(QUERY, [t])[0] for t in TEXTS])
    assert np.allclose(alone, onnx_scores, atol=1e-5)
    assert onnx_backend.max_length == 64


def test_newest_trained_model_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default models_dir, relative to the working directory (the suite sets its own).
    monkeypatch.delenv("RAGRAIL_RERANKER_MODELS_DIR", raising=False)
    root = tmp_path / "models" / "reranker"
    for name, created in (("a/v1", "2030-01-01T00:00:00+00:00"), ("a/v2", "2031-01-01T00:00:00")):
        (root / name).mkdir(parents=True)
        (root / name / "config.json").write_text("{}")
        (root / name / "manifest.json").write_text(f'{{"created_at": "{created}"}}')
    (root / "b" / "old").mkdir(parents=True)
    (root / "b" / "old" / "config.json").write_text("{}")  # no manifest: its mtime, now
    (root / "a" / "v1" / "model.onnx").write_text("")
    assert newest_reranker(models_dir=str(root)) == root / "a" / "v2"
    assert newest_reranker("model.onnx", str(root)) == root / "a" / "v1"
    assert newest_reranker(models_dir=str(tmp_path / "nothing")) is None

    monkeypatch.chdir(tmp_path)
    assert newest_reranker() == root / "a" / "v2"  # models/reranker by default
    assert model_dir(RerankerSettings()) == root / "a" / "v2"
    assert model_dir(RerankerSettings(backend="onnx")) == root / "a" / "v1"
    with pytest.raises(FailedPrecondition, match=r"has no model\.onnx"):
        model_dir(RerankerSettings(model=str(root / "b" / "old")), "model.onnx")
    with pytest.raises(FailedPrecondition, match="does not exist"):
        model_dir(RerankerSettings(model=str(tmp_path / "missing")))
    monkeypatch.chdir(tmp_path / "models")
    with pytest.raises(FailedPrecondition, match=r"python -m trainers\.reranker"):
        model_dir(RerankerSettings())


def test_onnx_file_setting_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RAGRAIL_RERANKER_ONNX_FILE: the file the onnx backend loads and the newest-model lookup
    requires (model_int8.onnx finds only quantized directories)."""
    monkeypatch.delenv("RAGRAIL_RERANKER_MODELS_DIR", raising=False)
    root = tmp_path / "models" / "reranker"
    for name, created, files in (
        ("m/v1", "2031-01-01T00:00:00+00:00", ("model.onnx",)),
        ("m-int8/v1", "2030-01-01T00:00:00+00:00", ("model.onnx", "model_int8.onnx")),
    ):
        (root / name).mkdir(parents=True)
        (root / name / "manifest.json").write_text(f'{{"created_at": "{created}"}}')
        for file in ("config.json", *files):
            (root / name / file).write_text("{}")
    assert RerankerSettings().onnx_file == "model.onnx"
    monkeypatch.setenv("RAGRAIL_RERANKER_ONNX_FILE", "model_int8.onnx")
    int8 = RerankerSettings(backend="onnx")
    assert int8.onnx_file == "model_int8.onnx"
    monkeypatch.chdir(tmp_path)
    assert model_dir(int8) == root / "m-int8" / "v1"
    assert model_dir(int8, "model.onnx") == root / "m" / "v1"
    with pytest.raises(
        FailedPrecondition,
        match=r"has no model_int8\.onnx.*ONNX files there: \['model\.onnx'\].*"
        r"RAGRAIL_RERANKER_ONNX_FILE.*trainers\.quantize reranker",
    ):
        load_backend(RerankerSettings(backend="onnx", model=str(root / "m" / "v1")))
    monkeypatch.chdir(root / "m")
    with pytest.raises(FailedPrecondition, match=r"no trained model with the model_int8\.onnx"):
        load_backend(RerankerSettings(backend="onnx"))


# -- the service as a process --------------------------------------------------------------


@dataclass
class Service:
    backend: str
    target: str
    metrics_port: int
    process: subprocess.Popen[bytes]
    log: Path


def wait_serving(service: Service, timeout: float = 180.0) -> None:
    what = f"reranker ({service.backend})"
    wait_grpc_serving(service.process, service.target, service.log, what, timeout, poll_s=0.5)


@pytest.fixture(scope="session")
def services(
    tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Service]]:
    logs = tmp_path_factory.mktemp("reranker-logs")
    running: dict[str, Service] = {}
    try:
        for backend in BACKENDS:
            port, metrics_port = free_port(), free_port()
            env = clean_env(
                RAGRAIL_RERANKER_BACKEND=backend,
                RAGRAIL_RERANKER_MODEL=str(tiny_model),
                RAGRAIL_RERANKER_PORT=str(port),
                RAGRAIL_RERANKER_METRICS_PORT=str(metrics_port),
                RAGRAIL_RERANKER_BATCH_SIZE="4",
                RAGRAIL_RERANKER_MAX_PASSAGES=str(MAX_PASSAGES),
                RAGRAIL_RERANKER_MAX_TEXT_CHARS=str(MAX_TEXT_CHARS),
                RAGRAIL_RERANKER_LOG_FORMAT="text",
            )
            log = logs / f"{backend}.log"
            process = start_module("services.reranker", env, log)
            running[backend] = Service(backend, f"127.0.0.1:{port}", metrics_port, process, log)
        for service in running.values():
            wait_serving(service)
        yield running
    finally:
        stop_processes([s.process for s in running.values()])


call = functools.partial(unary, reranker_pb2_grpc.RerankerStub)


def passages(texts: list[str]) -> list[common_pb2.TextPassage]:
    out = []
    for i, text in enumerate(texts):
        metadata = struct_pb2.Struct()
        metadata.update({"position": i, "source": f"doc-{i}.md"})
        out.append(common_pb2.TextPassage(id=f"p{i}", text=text, metadata=metadata))
    return out


def rerank(target: str, **fields) -> reranker_pb2.RerankResponse:  # type: ignore[no-untyped-def]
    fields.setdefault("query", QUERY)
    fields.setdefault("passages", passages(TEXTS))
    return call(target, "Rerank", reranker_pb2.RerankRequest(**fields))


@pytest.mark.integration
@pytest.mark.parametrize("backend", BACKENDS)
def test_results_are_ordered_by_score_with_their_index(
    services: dict[str, Service], tiny_model: Path, backend: str
) -> None:
    reply = rerank(services[backend].target)
    assert reply.model == str(tiny_model)
    assert sorted(r.index for r in reply.results) == list(range(len(TEXTS)))
    scores = [r.score for r in reply.results]
    assert scores == sorted(scores, reverse=True)
    sent = passages(TEXTS)
    for result in reply.results:
        assert result.passage == sent[result.index]  # id, text and metadata come back as sent
    assert reply.results[0].passage.metadata["source"] == f"doc-{reply.results[0].index}.md"


@pytest.mark.integration
def test_both_backends_give_the_same_order(services: dict[str, Service]) -> None:
    torch_reply, onnx_reply = (rerank(services[b].target) for b in BACKENDS)
    assert [r.index for r in torch_reply.results] == [r.index for r in onnx_reply.results]
    for a, b in zip(torch_reply.results, onnx_reply.results, strict=True):
        assert a.score == pytest.approx(b.score, abs=1e-3)


@pytest.mark.integration
@pytest.mark.parametrize("backend", BACKENDS)
def test_top_n_and_score_threshold(services: dict[str, Service], backend: str) -> None:
    target = services[backend].target
    full = [(r.index, r.score) for r in rerank(target).results]
    top = rerank(target, top_n=2).results
    assert [(r.index, r.score) for r in top] == full[:2]
    assert len(rerank(target, top_n=len(TEXTS) + 5).results) == len(TEXTS)
    third = full[2][1]
    kept = rerank(target, score_threshold=third).results
    assert [(r.index, r.score) for r in kept] == [x for x in full if x[1] >= third]
    assert len(kept) >= 3
    assert len(rerank(target, score_threshold=third, top_n=1).results) == 1
    assert rerank(target, score_threshold=full[0][1] + 0.01).results == []
    assert len(rerank(target, score_threshold=-1.0).results) == len(TEXTS)


@pytest.mark.integration
@pytest.mark.parametrize("backend", BACKENDS)
def test_no_passages_give_an_empty_result(services: dict[str, Service], backend: str) -> None:
    reply = rerank(services[backend].target, passages=[])
    assert list(reply.results) == []


@pytest.mark.integration
@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"query": ""}, "query is empty"),
        ({"query": "   "}, "query is empty"),
        ({"query": "q" * (MAX_TEXT_CHARS + 1)}, "query has 5001 characters"),
        ({"passages": passages(["fine", " \n"])}, "passages[1].text is empty"),
        ({"passages": passages(["ok", "x" * (MAX_TEXT_CHARS + 1)])}, "passages[1].text has"),
        ({"passages": passages(["a passage"] * (MAX_PASSAGES + 1))}, "MAX_PASSAGES"),
        ({"top_n": -1}, "top_n is -1"),
        ({"score_threshold": float("nan")}, "score_threshold"),
    ],
)
def test_bad_requests_are_invalid_argument(
    services: dict[str, Service], fields: dict, fragment: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        rerank(services["onnx"].target, **fields)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert fragment in info.value.details()


@pytest.mark.integration
@pytest.mark.parametrize("backend", BACKENDS)
def test_info_reports_backend_model_and_length(
    services: dict[str, Service], tiny_model: Path, backend: str
) -> None:
    info = call(services[backend].target, "Info", common_pb2.InfoRequest())
    assert info.service.service == "reranker"
    assert info.service.backend == backend
    assert info.service.model == str(tiny_model)
    assert info.service.version
    assert info.service.details["device"] == "cpu"
    assert info.service.details["batch_size"] == "4"
    assert info.max_length == 64


@pytest.mark.integration
def test_health_reflection_and_metrics(services: dict[str, Service]) -> None:
    service = services["sentence-transformers"]
    rerank(service.target)
    status, names = health_and_services(service.target, "ragrail.v1.Reranker")
    assert status == health_pb2.HealthCheckResponse.SERVING
    assert "ragrail.v1.Reranker" in names and "grpc.health.v1.Health" in names
    metrics = httpx.get(f"http://127.0.0.1:{service.metrics_port}/metrics").text
    assert 'ragrail_grpc_requests_total{code="OK",method="Rerank",service="reranker"}' in metrics


@pytest.mark.integration
def test_without_a_model_it_stops_and_says_how_to_train_one(tmp_path: Path) -> None:
    env = {
        "PYTHONPATH": str(REPO),
        "RAGRAIL_RERANKER_PORT": str(free_port()),
        "RAGRAIL_RERANKER_METRICS_PORT": "-1",
        "RAGRAIL_RERANKER_LOG_FORMAT": "text",
    }
    done = run_module("services.reranker", env, cwd=tmp_path)  # no models/reranker/ there
    assert done.returncode == 2, done.stdout + done.stderr
    assert "python -m trainers.reranker" in done.stdout
    assert "RAGRAIL_RERANKER_MODEL" in done.stdout
