"""Embedding backends, chosen by `RAGRAIL_EMBEDDER_BACKEND`."""

from __future__ import annotations

from services.embedder.backends.base import EmbeddingBackend
from services.embedder.settings import EmbedderSettings
from shared.backends import backend_class

BACKENDS: dict[str, str] = {
    "sentence-transformers": (
        "services.embedder.backends.sentence_transformers:SentenceTransformersBackend"
    ),
    "onnx": "services.embedder.backends.onnx:OnnxBackend",
}


def load_backend(settings: EmbedderSettings) -> EmbeddingBackend:
    backend: EmbeddingBackend = backend_class("embedder", settings.backend, BACKENDS)(settings)
    return backend
