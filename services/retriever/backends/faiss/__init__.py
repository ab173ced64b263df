"""The FAISS backend: dense search with FAISS and BM25 with bm25s, in the retriever's process,
on local files. What it is for, its files and its crash safety: services/retriever/README.md
("FAISS backend"). `FaissStore` (store.py) is the store; the other modules are its parts."""

from services.retriever.backends.faiss.store import FaissStore

__all__ = ["FaissStore"]

# The package is the store's public home: the registry (backends/__init__.py) and callers
# import it from here, so it reports this module, as a package's public classes do.
FaissStore.__module__ = __name__
