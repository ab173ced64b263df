"""The cross-encoder `RAGRAIL_RERANKER_BACKEND` names, on the configured model directory or
the newest trained one, or on a model server; the models themselves are
shared/models/cross_encoder.py's and remote_ranker.py's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from services.reranker.settings import RerankerSettings
from shared.backends import resolve_torch_device
from shared.models.cross_encoder import (
    CrossEncoder,
    OnnxCrossEncoder,
    TorchCrossEncoder,
    find_reranker,
)
from shared.models.remote import RemoteServer
from shared.models.remote_ranker import NimRanker, RemoteRanker, RerankRanker
from shared.models.service import load_model, onnx_on_cpu


def model_dir(settings: RerankerSettings, required: str = "") -> Path:
    """The model directory the settings name, or the newest trained one holding the file the
    backend loads (`required` overrides which)."""
    return find_reranker(
        settings.model, settings.models_dir, settings.backend, required or settings.required_file
    )


def sentence_transformers(settings: RerankerSettings) -> CrossEncoder:
    """A CrossEncoder on PyTorch."""
    path = model_dir(settings)  # before the slow imports
    return TorchCrossEncoder.load(
        path,
        device=resolve_torch_device(settings.device, "RAGRAIL_RERANKER_DEVICE"),
        max_length=settings.max_length,
        batch_size=settings.batch_size,
    )


def onnx(settings: RerankerSettings) -> CrossEncoder:
    """onnxruntime on the model directory's `onnx_file`."""
    onnx_on_cpu("reranker", settings.device)
    return OnnxCrossEncoder(
        model_dir(settings),
        settings.onnx_file,
        batch_size=settings.batch_size,
        max_length=settings.max_length,
    )


def _remote(
    ranker: Callable[..., RemoteRanker], settings: RerankerSettings, **options: str
) -> CrossEncoder:
    """`ranker` on the model server at RAGRAIL_RERANKER_REMOTE_URL, with the batching and
    window every remote backend takes and `options`, its own."""
    return ranker(
        RemoteServer(settings, "reranker"),
        batch_size=settings.remote_batch_size,
        max_length=settings.max_length,
        **options,
    )


def rerank(settings: RerankerSettings) -> CrossEncoder:
    """A /rerank server (TEI, infinity, Cohere, ...) at RAGRAIL_RERANKER_REMOTE_URL."""
    return _remote(RerankRanker, settings, field=settings.remote_documents_field)


def nim(settings: RerankerSettings) -> CrossEncoder:
    """NVIDIA NIM's /v1/ranking at RAGRAIL_RERANKER_REMOTE_URL (ending in /v1)."""
    return _remote(NimRanker, settings, truncate=settings.remote_truncate)


BACKENDS: dict[str, Callable[[RerankerSettings], CrossEncoder]] = {
    "sentence-transformers": sentence_transformers,
    "onnx": onnx,
    "rerank": rerank,
    "nim": nim,
}


def load_backend(settings: RerankerSettings) -> CrossEncoder:
    return load_model(settings, BACKENDS)
