"""Rerank backends, chosen by `RAGRAIL_RERANKER_BACKEND`.

Backends are imported only when chosen.
"""

from __future__ import annotations

from services.reranker.backends.base import RerankBackend
from services.reranker.settings import RerankerSettings
from shared.backends import backend_class

BACKENDS: dict[str, str] = {
    "sentence-transformers": (
        "services.reranker.backends.sentence_transformers:SentenceTransformersBackend"
    ),
    "onnx": "services.reranker.backends.onnx:OnnxBackend",
}


def load_backend(settings: RerankerSettings) -> RerankBackend:
    backend: RerankBackend = backend_class("reranker", settings.backend, BACKENDS)(settings)
    return backend
