"""The interface every retriever storage backend implements.

A backend stores chunks (text, dense vector, metadata) per collection and answers dense
(cosine) and sparse (BM25) searches. Fusion of the two result lists happens above it.
Methods are blocking and may be called from several worker threads at once. The checks a
backend makes on what it is given (names, chunks, vectors, k) are in validation.py, shared by
every backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from shared.errors import NotFound

if TYPE_CHECKING:
    from services.retriever.filters import MetadataFilter


@dataclass
class CollectionRecord:
    name: str
    dimension: int
    description: str = ""
    created_at: float = 0.0  # seconds since the epoch


@dataclass
class ChunkRecord:
    id: str
    document_id: str
    text: str
    vector: list[float]  # empty in search results unless vectors were asked for
    metadata: dict[str, Any]
    document_name: str = ""
    chunk_index: int = 0


@dataclass
class DocumentRecord:
    id: str
    name: str
    num_chunks: int
    metadata: dict[str, Any]


@dataclass
class ScoredChunk:
    chunk: ChunkRecord
    score: float


def collection_not_found(name: str) -> NotFound:
    return NotFound(f"collection '{name}' does not exist; create it with POST /v1/collections")


class VectorStore(ABC):
    name: ClassVar[str]

    @abstractmethod
    def describe(self) -> dict[str, str]:
        """Facts for the Info call (uri, index type, ...). Must not do I/O: Info calls it
        on the event loop."""

    @abstractmethod
    def create_collection(
        self, name: str, dimension: int, description: str = ""
    ) -> CollectionRecord:
        """AlreadyExists if the collection is there."""

    @abstractmethod
    def get_collection(self, name: str) -> CollectionRecord: ...

    @abstractmethod
    def list_collections(self) -> list[CollectionRecord]:
        """Sorted by name."""

    @abstractmethod
    def delete_collection(self, name: str) -> None: ...

    @abstractmethod
    def count(self, name: str) -> tuple[int, int]:
        """(num_chunks, num_documents)."""

    @abstractmethod
    def upsert(self, name: str, chunks: list[ChunkRecord]) -> int:
        """Inserts or replaces chunks by id; returns how many were written. InvalidArgument
        when a vector has the wrong dimension."""

    @abstractmethod
    def delete_stale_chunks(self, name: str, document_ids: list[str], keep_ids: list[str]) -> int:
        """Deletes the chunks of these documents whose id is not in keep_ids; returns how
        many were deleted."""

    @abstractmethod
    def delete_documents(self, name: str, document_ids: list[str]) -> int:
        """Returns how many chunks were deleted."""

    @abstractmethod
    def list_documents(
        self, name: str, limit: int, offset: int
    ) -> tuple[list[DocumentRecord], int]:
        """One page of documents sorted by id, and the total number of documents."""

    @abstractmethod
    def dense_search(
        self,
        name: str,
        vector: list[float],
        k: int,
        flt: MetadataFilter | None,
        include_vectors: bool = False,
    ) -> list[ScoredChunk]:
        """Best first; score is the cosine similarity (vectors arrive normalised)."""

    @abstractmethod
    def sparse_search(
        self,
        name: str,
        text: str,
        k: int,
        flt: MetadataFilter | None,
        include_vectors: bool = False,
    ) -> list[ScoredChunk]:
        """BM25 over the chunk texts, best first; score is the BM25 score (>= 0)."""

    @abstractmethod
    def close(self) -> None: ...
