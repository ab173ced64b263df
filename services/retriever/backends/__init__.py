"""Retriever storage backends, chosen by `RAGRAIL_RETRIEVER_BACKEND`.

Backends are imported only when chosen, so pymilvus is not loaded by code that never
touches Milvus, nor faiss and bm25s by code that never touches FAISS. Each backend class
builds itself from the settings (`from_settings`), so choosing one needs no code here or in
the servicer beyond its line in BACKENDS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.retriever.backends.base import VectorStore
from shared.backends import backend_class

if TYPE_CHECKING:
    from services.retriever.settings import RetrieverSettings

BACKENDS: dict[str, str] = {
    "milvus": "services.retriever.backends.milvus:MilvusStore",
    "faiss": "services.retriever.backends.faiss:FaissStore",
}


def load_backend(settings: RetrieverSettings) -> VectorStore:
    """Opens the store `settings.backend` names, configured by its own `from_settings`."""
    store: VectorStore = backend_class("retriever", settings.backend, BACKENDS).from_settings(
        settings
    )
    return store
