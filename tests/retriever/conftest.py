"""Store fixtures for the retriever backend tests. `backend` runs a test once per backend;
test_milvus_backend.py and test_faiss_backend.py override it with their one backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.retriever.backends.base import VectorStore
from tests.retriever.stores import BACKEND_NAMES, DIM, NEEDS, open_store, six_chunks


@pytest.fixture(params=BACKEND_NAMES)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def location(backend: str, tmp_path: Path) -> str:
    for module in NEEDS[backend]:
        pytest.importorskip(module)
    if backend == "milvus":
        return str(tmp_path / "milvus" / "test.db")
    return str(tmp_path / "data" / "faiss")


@pytest.fixture
def store(backend: str, location: str) -> Iterator[VectorStore]:
    s = open_store(backend, location)
    yield s
    s.close()


@pytest.fixture
def docs(store: VectorStore) -> VectorStore:
    """A collection 'docs' with three documents of 2, 3 and 1 chunks."""
    store.create_collection("docs", DIM, "test docs")
    store.upsert("docs", six_chunks())
    return store
