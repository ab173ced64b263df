"""The interface every retriever storage backend implements.

A backend stores chunks (text, dense vector, metadata) per collection and answers dense
(cosine) and sparse (BM25) searches. Fusion of the two result lists happens above it.
Methods are blocking and may be called from several worker threads at once.

The public methods that take names, pages, k or a query check them here, with the checks of
validation.py, and then call the backend's hook of the same name with a leading underscore:
every backend refuses the same input with the same words and in the same order, and a backend
implements only its storage. What a backend checks on the chunks it writes (`check_chunk`)
depends on how it stores them, so `upsert` calls validation.py itself.
"""

from __future__ import annotations

import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from services.retriever.backends.validation import (
    MAX_K,
    check_new_collection,
    check_page,
    check_query_vector,
    validate_collection_name,
    validate_k,
)
from shared.errors import AlreadyExists, FailedPrecondition, NotFound, RagrailError, Unavailable

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from services.retriever.analysis import LexicalAnalyzer
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


@dataclass(frozen=True)
class SearchRequest:
    """A search whose collection exists and whose k is in range: what a backend's search
    hook receives besides the checked query. `k` is how many hits this one mode returns: the
    request's fetch_k in a dense or sparse search, its candidate depth (candidate_k) in each
    mode of a hybrid search, before fusion cuts to fetch_k."""

    collection: str
    k: int
    flt: MetadataFilter | None
    include_vectors: bool


def collection_not_found(name: str) -> NotFound:
    return NotFound(f"collection '{name}' does not exist; create it with POST /v1/collections")


def collection_exists(name: str) -> AlreadyExists:
    return AlreadyExists(
        f"collection '{name}' already exists; delete it first or choose another name"
    )


def store_closed(store: str) -> Unavailable:
    return Unavailable(f"the {store} store is closed; the retriever is shutting down")


class VectorStore(ABC):
    name: ClassVar[str]
    title: ClassVar[str]  # the store's name in messages: "FAISS", "Milvus"
    # The BM25 analysis of this store; each collection keeps the one it was built with.
    _analyzer: LexicalAnalyzer
    _closed: bool = False  # set by close()

    # -- the interface: checks, then the backend's hook ----------------------------------

    def create_collection(
        self, name: str, dimension: int, description: str = ""
    ) -> CollectionRecord:
        """AlreadyExists if the collection is there."""
        validate_collection_name(name)
        check_new_collection(dimension, description)
        return self._create_collection(name, dimension, description)

    def get_collection(self, name: str) -> CollectionRecord:
        validate_collection_name(name)
        return self._get_collection(name)

    def delete_collection(self, name: str) -> None:
        validate_collection_name(name)
        self._delete_collection(name)

    def list_documents(
        self, name: str, limit: int, offset: int
    ) -> tuple[list[DocumentRecord], int]:
        """One page of documents sorted by id, and the total number of documents."""
        check_page(limit, offset)
        return self._list_documents(name, limit, offset)

    def dense_search(
        self,
        name: str,
        vector: list[float],
        k: int,
        flt: MetadataFilter | None,
        include_vectors: bool = False,
    ) -> list[ScoredChunk]:
        """Best first; score is the cosine similarity (vectors arrive normalised)."""
        dimension = self._open(name)
        validate_k(k, MAX_K)
        query = check_query_vector(vector, dimension, name)
        return self._dense_search(SearchRequest(name, k, flt, include_vectors), query)

    def sparse_search(
        self,
        name: str,
        text: str,
        k: int,
        flt: MetadataFilter | None,
        include_vectors: bool = False,
    ) -> list[ScoredChunk]:
        """BM25 over the chunk texts, best first; score is the BM25 score (>= 0)."""
        self._open(name)
        validate_k(k, MAX_K)
        terms = self._analyzer.terms(text)
        if not terms:
            return []  # only stop words: nothing for BM25 to match
        return self._sparse_search(SearchRequest(name, k, flt, include_vectors), terms)

    def open_all(self) -> list[str]:
        """Opens every collection, before the service says it serves: a store opens one on
        its first read, and Milvus Lite, which runs inside this process and so starts with
        nothing loaded, once took 10 s there (a restarted retriever's first search, past its
        caller's deadline, on a loaded machine). Returns the names opened; one that cannot
        be opened is logged and left to open on first use, as before."""
        opened: list[str] = []
        for record in self.list_collections():
            try:
                self._open(record.name)
            except RagrailError as exc:
                log.warning("collection '%s' not opened at start: %s", record.name, exc.message)
                continue
            opened.append(record.name)
        return opened

    def check_analysis(self, name: str, built_with: str | None) -> None:
        """FailedPrecondition unless collection `name`, whose BM25 terms were analysed as
        `built_with`, is analysed as this store analyses queries."""
        if built_with != self._analyzer.signature:
            raise FailedPrecondition(
                f"collection '{name}' was indexed with text analysis '{built_with}', but this "
                f"retriever analyses '{self._analyzer.signature}'; BM25 would miss terms. "
                "Set the retriever's bm25_language back, or re-create the collection and "
                "ingest again"
            )

    @contextlib.contextmanager
    def _errors(self, action: str, collection: str | None = None) -> Iterator[None]:
        """Runs `action` on the store: Unavailable once the store is closed, and the store's
        own failures as ragrail's errors (`_domain_error`), never a raw client exception."""
        if self._closed:
            raise store_closed(self.title)
        try:
            yield
        except RagrailError:
            raise
        except Exception as exc:
            error = self._domain_error(exc, action, collection)
            if error is None:
                raise
            raise error from exc

    # -- what each backend implements -----------------------------------------------------

    @abstractmethod
    def describe(self) -> dict[str, str]:
        """Facts for the Info call (uri, index type, ...). Must not do I/O: Info calls it
        on the event loop."""

    @abstractmethod
    def list_collections(self) -> list[CollectionRecord]:
        """Sorted by name."""

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
    def close(self) -> None: ...

    @abstractmethod
    def _domain_error(
        self, exc: Exception, action: str, collection: str | None
    ) -> RagrailError | None:
        """The error for the caller when `action` (on `collection`) failed with `exc`, a
        failure of the store's engine; None for anything else, which propagates."""

    @abstractmethod
    def _open(self, name: str) -> int:
        """The dimension of collection `name`, a valid name, opening it on first use:
        NotFound when there is none, FailedPrecondition (`check_analysis`) when its BM25
        terms were analysed otherwise."""

    @abstractmethod
    def _create_collection(self, name: str, dimension: int, description: str) -> CollectionRecord:
        """Arguments checked; AlreadyExists (`collection_exists`) if it is there."""

    @abstractmethod
    def _get_collection(self, name: str) -> CollectionRecord: ...

    @abstractmethod
    def _delete_collection(self, name: str) -> None: ...

    @abstractmethod
    def _list_documents(
        self, name: str, limit: int, offset: int
    ) -> tuple[list[DocumentRecord], int]: ...

    @abstractmethod
    def _dense_search(self, search: SearchRequest, query: list[float]) -> list[ScoredChunk]:
        """`query`: finite floats of the collection's dimension, not yet normalised."""

    @abstractmethod
    def _sparse_search(self, search: SearchRequest, terms: list[str]) -> list[ScoredChunk]:
        """`terms`: the query analysed by `_analyzer`, at least one."""
