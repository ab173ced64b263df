"""The embedding model `RAGRAIL_EMBEDDER_BACKEND` names, built from the settings; the models
themselves are shared/models/encoder.py's, and remote_encoder.py's for a model server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from services.embedder.settings import EmbedderSettings
from shared.backends import resolve_torch_device
from shared.errors import FailedPrecondition
from shared.models.encoder import (
    PACKAGED_MODEL_NAME,
    Encoder,
    OnnxEncoder,
    TorchEncoder,
    packaged_minilm,
)
from shared.models.remote import RemoteServer
from shared.models.remote_encoder import RemoteEncoder
from shared.models.service import load_model, onnx_on_cpu


def sentence_transformers(settings: EmbedderSettings) -> Encoder:
    """Any local sentence-transformers directory, the packaged MiniLM by default."""
    path = Path(settings.model) if settings.model else packaged_minilm()
    if not path.is_dir():
        raise FailedPrecondition(
            f"embedder model directory {path} does not exist; set RAGRAIL_EMBEDDER_MODEL to a "
            "local sentence-transformers directory (models are never downloaded)"
        )
    return TorchEncoder.load(
        path,
        device=resolve_torch_device(settings.device, "RAGRAIL_EMBEDDER_DEVICE"),
        threads=settings.torch_threads,
        max_length=settings.max_length,
        batch_size=settings.batch_size,
        normalize=settings.normalize,
        model_name=settings.model or PACKAGED_MODEL_NAME,
    )


def onnx(settings: EmbedderSettings) -> Encoder:
    """onnxruntime on CPU, on the output of `python -m trainers.quantize embedder`."""
    onnx_on_cpu("embedder", settings.device)
    return OnnxEncoder(
        settings.onnx_model_dir(),
        settings.onnx_file,
        threads=settings.torch_threads,
        batch_size=settings.batch_size,
        max_length=settings.max_length,
        normalize=settings.normalize,
    )


def openai(settings: EmbedderSettings) -> Encoder:
    """Any OpenAI-compatible /v1/embeddings server at RAGRAIL_EMBEDDER_REMOTE_URL; the start
    probes it for the model's name and dimension."""
    return RemoteEncoder(
        RemoteServer(settings, "embedder"),
        batch_size=settings.remote_batch_size,
        concurrency=settings.remote_concurrency,
        input_type=settings.remote_input_type,
        truncate=settings.remote_truncate,
        tokenizer=settings.remote_tokenizer,
        max_length=settings.max_length,
        normalize=settings.normalize,
    )


BACKENDS: dict[str, Callable[[EmbedderSettings], Encoder]] = {
    "sentence-transformers": sentence_transformers,
    "onnx": onnx,
    "openai": openai,
}


def load_backend(settings: EmbedderSettings) -> Encoder:
    return load_model(settings, BACKENDS)
