"""Retriever storage backends, chosen by `RAGRAIL_RETRIEVER_BACKEND`.

Backends are imported only when chosen, so pymilvus is not loaded by code that never
touches Milvus.
"""

from __future__ import annotations

import importlib
from typing import Any

from services.retriever.backends.base import VectorStore
from shared.errors import InvalidArgument

BACKENDS: dict[str, str] = {
    "milvus": "services.retriever.backends.milvus:MilvusStore",
}


def load_backend(name: str, **kwargs: Any) -> VectorStore:
    if name not in BACKENDS:
        raise InvalidArgument(
            f"unknown retriever backend '{name}'; choose one of {sorted(BACKENDS)}"
        )
    module, cls = BACKENDS[name].split(":")
    store: VectorStore = getattr(importlib.import_module(module), cls)(**kwargs)
    return store
