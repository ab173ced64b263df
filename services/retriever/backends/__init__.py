"""Retriever storage backends, chosen by `RAGRAIL_RETRIEVER_BACKEND`.

Backends are imported only when chosen, so pymilvus is not loaded by code that never
touches Milvus, nor faiss and bm25s by code that never touches FAISS. Each backend class
builds itself from the settings (`from_settings`), so choosing one needs no code here or in
the servicer beyond its line in BACKENDS.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from services.retriever.backends.base import VectorStore
from shared.errors import FailedPrecondition, InvalidArgument

if TYPE_CHECKING:
    from services.retriever.settings import RetrieverSettings

BACKENDS: dict[str, str] = {
    "milvus": "services.retriever.backends.milvus:MilvusStore",
    "faiss": "services.retriever.backends.faiss:FaissStore",
}


def load_backend(settings: RetrieverSettings) -> VectorStore:
    """Opens the store `settings.backend` names, configured by its own `from_settings`."""
    name = settings.backend
    if name not in BACKENDS:
        raise InvalidArgument(
            f"unknown retriever backend '{name}'; choose one of {sorted(BACKENDS)}"
        )
    module_name, class_name = BACKENDS[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith(("services.", "shared.")):
            raise FailedPrecondition(
                f"retriever backend '{name}' needs the Python package '{exc.name}', which is "
                "not installed; install it (constraints.txt pins the version), or choose "
                "another RAGRAIL_RETRIEVER_BACKEND"
            ) from exc
        raise
    store: VectorStore = getattr(module, class_name).from_settings(settings)
    return store
