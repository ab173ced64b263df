"""The Milvus backend: Milvus Lite (a `.db` path, in this process) or a Milvus server, through
`pymilvus.MilvusClient`. What was found about the two engines: services/retriever/README.md
("Milvus backend"). `MilvusStore` (store.py) is the store; the other modules are its parts."""

from services.retriever.backends.milvus.store import MilvusStore

__all__ = ["MilvusStore"]

# The package is the store's public home: the registry (backends/__init__.py) and callers
# import it from here, so it reports this module, as a package's public classes do.
MilvusStore.__module__ = __name__
