"""Rerank backends, chosen by `RAGRAIL_RERANKER_BACKEND`.

Backends are imported only when chosen.
"""

from __future__ import annotations

import importlib

from services.reranker.backends.base import RerankBackend
from services.reranker.settings import RerankerSettings
from shared.errors import InvalidArgument

BACKENDS: dict[str, str] = {
    "sentence-transformers": (
        "services.reranker.backends.sentence_transformers:SentenceTransformersBackend"
    ),
    "onnx": "services.reranker.backends.onnx:OnnxBackend",
}


def load_backend(settings: RerankerSettings) -> RerankBackend:
    if settings.backend not in BACKENDS:
        raise InvalidArgument(
            f"unknown reranker backend '{settings.backend}'; choose one of {sorted(BACKENDS)}"
        )
    module, cls = BACKENDS[settings.backend].split(":")
    backend: RerankBackend = getattr(importlib.import_module(module), cls)(settings)
    return backend
