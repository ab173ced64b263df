"""Embedding backends, chosen by `RAGRAIL_EMBEDDER_BACKEND`."""

from __future__ import annotations

import importlib

from services.embedder.backends.base import EmbeddingBackend
from services.embedder.settings import EmbedderSettings
from shared.errors import InvalidArgument

BACKENDS: dict[str, str] = {
    "sentence-transformers": (
        "services.embedder.backends.sentence_transformers:SentenceTransformersBackend"
    ),
    "onnx": "services.embedder.backends.onnx:OnnxBackend",
}


def load_backend(settings: EmbedderSettings) -> EmbeddingBackend:
    if settings.backend not in BACKENDS:
        raise InvalidArgument(
            f"unknown embedder backend '{settings.backend}'; choose one of {sorted(BACKENDS)}"
        )
    module, cls = BACKENDS[settings.backend].split(":")
    return getattr(importlib.import_module(module), cls)(settings)
