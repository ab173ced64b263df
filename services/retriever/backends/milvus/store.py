"""MilvusStore: one Milvus collection per ragrail collection, through `pymilvus.MilvusClient`.

The uri is either a Milvus Lite path ending in `.db` or a Milvus server (http://host:19530);
both take the same code path. What was found by experiment about Lite and a server, and how
this store works around it, is in services/retriever/README.md ("Milvus backend").
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import pymilvus
from pymilvus import MilvusClient
from pymilvus.client.types import LoadState
from pymilvus.exceptions import MilvusException

from services.retriever.analysis import LexicalAnalyzer
from services.retriever.backends.base import (
    CollectionRecord,
    DocumentRecord,
    ScoredChunk,
    VectorStore,
    collection_exists,
    collection_not_found,
)
from services.retriever.backends.milvus import errors, lite
from services.retriever.backends.milvus.reads import iterate_rows, split_quotable
from services.retriever.backends.milvus.schema import (
    MIRRORED,
    PROP_ANALYZER,
    PROP_CREATED_AT,
    PROP_DESCRIPTION,
    PROP_SCHEMA,
    SCHEMA_VERSION,
    check_options,
    chunk_of,
    collection_record,
    collection_schema,
    dimension_of,
    index_params,
    mirrored_columns,
    output_fields,
    rows_of,
    search_params,
)
from services.retriever.backends.validation import is_collection_name, validate_collection_name
from services.retriever.filters import MirroredList, string_list, to_milvus_expr
from shared.errors import NotFound, RagrailError

if TYPE_CHECKING:
    from services.retriever.backends.base import ChunkRecord, SearchRequest
    from services.retriever.settings import RetrieverSettings

_T = TypeVar("_T")
log = logging.getLogger(__name__)

UPSERT_BATCH = 512  # rows per call: keeps one gRPC message far below its size limit
DELETE_BATCH = 1_024  # ids per `id in [...]` expression
DOCUMENT_BATCH = 256  # document ids per `document_id in [...]` expression


class MilvusStore(VectorStore):
    name = "milvus"
    title = "Milvus"

    def __init__(
        self,
        uri: str,
        token: str = "",
        db_name: str = "",
        timeout_s: float = 10.0,
        index_type: str = "AUTOINDEX",
        collection_prefix: str = "ragrail_",
        analyzer: LexicalAnalyzer | None = None,
    ) -> None:
        check_options(uri, timeout_s, index_type, collection_prefix)
        self._uri = uri
        self._is_lite = uri.endswith(".db")
        self._lite_path = os.path.abspath(uri) if self._is_lite else ""
        self._db_name = db_name
        self._timeout = timeout_s
        self._index_type = index_type
        self._prefix = collection_prefix
        self._analyzer = analyzer or LexicalAnalyzer()
        # Writes are serialised: Lite's engine is not safe for concurrent writers to one
        # collection, and counting-then-deleting must not interleave. Reads run in parallel.
        self._write_lock = threading.RLock()
        # Loading is serialised so that concurrent first reads load a collection once.
        self._load_lock = threading.Lock()
        # Collections known to exist and be loaded, with their dimension. Plain dict/set
        # operations are atomic under the GIL, so reads need no lock.
        self._known: dict[str, int] = {}
        # Per known collection, the metadata keys it mirrors into columns (schema.py).
        self._mirrored: dict[str, dict[str, MirroredList]] = {}
        self._dirty: set[str] = set()  # Lite: written since the last flush
        self._closed = False
        self._client = self._connect(token)

    @classmethod
    def from_settings(cls, settings: RetrieverSettings) -> MilvusStore:
        return cls(
            uri=settings.milvus_uri,
            token=settings.milvus_token,
            db_name=settings.milvus_db_name,
            timeout_s=settings.milvus_timeout_s,
            index_type=settings.milvus_index_type,
            analyzer=LexicalAnalyzer(settings.bm25_language),
        )

    # -- connection and errors ---------------------------------------------------------

    @property
    def display_uri(self) -> str:
        """The uri without credentials, safe to log and show."""
        return errors.display_uri(self._uri, self._is_lite)

    def _connect(self, token: str) -> MilvusClient:
        if self._is_lite:
            lite.prepare_path(self._uri)
        try:
            client = MilvusClient(
                uri=self._uri, token=token, db_name=self._db_name, timeout=self._timeout
            )
        except MilvusException as exc:
            raise errors.connect_error(exc, self._uri, self._is_lite) from exc
        if self._is_lite:
            lite.acquire(self._lite_path)
        return client

    def _domain_error(
        self, exc: Exception, action: str, collection: str | None
    ) -> RagrailError | None:
        """pymilvus's and gRPC's failures; a collection found missing is forgotten."""
        if isinstance(exc, MilvusException):
            error = errors.domain_error(exc, action, collection, self.display_uri, self._timeout)
            if collection is not None and isinstance(error, NotFound):
                self._forget(collection)
            return error
        if isinstance(exc, grpc.RpcError):
            return errors.rpc_error(exc, self.display_uri, action)
        return None

    # -- collection bookkeeping --------------------------------------------------------

    def _mname(self, name: str) -> str:
        return self._prefix + name

    def _forget(self, name: str) -> None:
        self._known.pop(name, None)
        self._mirrored.pop(name, None)
        self._dirty.discard(name)

    def _open(self, name: str) -> int:
        """Checks the collection exists (NotFound otherwise), loads it once, returns its
        dimension."""
        validate_collection_name(name)
        dimension = self._known.get(name)
        if dimension is not None:
            return dimension
        mname = self._mname(name)
        with self._errors("opening the collection", name):
            info = self._client.describe_collection(mname, timeout=self._timeout)
            self._load(mname)
        dimension = dimension_of(info)
        if dimension is None:
            raise collection_not_found(name)  # a foreign collection that shares the prefix
        self.check_analysis(name, (info.get("properties") or {}).get(PROP_ANALYZER))
        self._mirrored[name] = mirrored_columns(info)
        self._known[name] = dimension
        return dimension

    def _load(self, mname: str) -> None:
        with self._load_lock:
            state = self._client.get_load_state(mname, timeout=self._timeout)
            if state.get("state") != LoadState.Loaded:
                self._load_collection(mname)

    def _load_collection(self, mname: str) -> None:
        if not self._is_lite:
            self._client.load_collection(mname, timeout=self._timeout)
            return
        lite.load_retrying(
            lambda: self._client.load_collection(mname, timeout=self._timeout),
            mname,
            self._timeout,
        )

    def _read(self, name: str, action: str, call: Callable[[], _T]) -> _T:
        """Runs the read `call`; a collection found released is loaded and read once more:
        once, after a SIGKILL and restart, Lite held a collection released although it had
        been opened."""
        with self._errors(action, name):
            try:
                return call()
            except MilvusException as exc:
                if not errors.is_released(exc):
                    raise
                log.warning("collection '%s' was released while %s; loading it again", name, action)
                self._load(self._mname(name))
                return call()

    def _flush_if_dirty(self, name: str) -> None:
        """Lite searches rows not yet flushed slowly (their indexes are rebuilt on every
        search), so a collection written to is flushed before its next read."""
        if name not in self._dirty:
            return
        with self._write_lock:
            if name not in self._dirty:
                return  # another reader flushed it meanwhile
            with self._errors("flushing the collection", name):
                self._client.flush(self._mname(name), timeout=self._timeout)
            self._dirty.discard(name)

    def _mark_dirty(self, name: str) -> None:
        if self._is_lite:
            self._dirty.add(name)

    # -- VectorStore -------------------------------------------------------------------

    def describe(self) -> dict[str, str]:
        return {
            "uri": self.display_uri,
            "mode": "milvus-lite" if self._is_lite else "milvus-server",
            "db_name": self._db_name or "default",
            "index_type": self._index_type,
            "metric": "COSINE",
            "sparse": "BM25 function, SPARSE_INVERTED_INDEX",
            "analyzer": self._analyzer.signature,
            "collection_prefix": self._prefix,
            "pymilvus": pymilvus.__version__,
        }

    def _create_collection(self, name: str, dimension: int, description: str) -> CollectionRecord:
        mname = self._mname(name)
        created_at = time.time()
        with self._write_lock, self._errors(errors.CREATING, name):
            if self._client.has_collection(mname, timeout=self._timeout):
                raise collection_exists(name)
            self._client.create_collection(
                mname,
                schema=collection_schema(dimension),
                properties={
                    PROP_DESCRIPTION: description,
                    PROP_CREATED_AT: repr(created_at),
                    PROP_SCHEMA: SCHEMA_VERSION,
                    PROP_ANALYZER: self._analyzer.signature,
                },
                consistency_level="Strong",  # counts and reads see every finished write
                timeout=self._timeout,
            )
            # Passing index_params to create_collection would wait for the (empty) indexes
            # by polling every 0.5 s through AllocTimestamp, which Lite does not implement
            # and logs a traceback for; an empty collection has nothing to wait for.
            try:
                self._client.create_index(
                    mname,
                    index_params(self._client, self._index_type),
                    timeout=self._timeout,
                    sync=False,
                )
                self._client.load_collection(mname, timeout=self._timeout)
            except MilvusException:
                # A collection without its indexes can be neither loaded nor searched.
                with suppress(MilvusException):
                    self._client.drop_collection(mname, timeout=self._timeout)
                raise
        self._mirrored[name] = MIRRORED
        self._known[name] = dimension
        return CollectionRecord(name, dimension, description, created_at)

    def _get_collection(self, name: str) -> CollectionRecord:
        with self._errors("describing the collection", name):
            info = self._client.describe_collection(self._mname(name), timeout=self._timeout)
        record = collection_record(name, info)
        if record is None:
            raise collection_not_found(name)
        return record

    def list_collections(self) -> list[CollectionRecord]:
        with self._errors("listing collections"):
            mnames = self._client.list_collections(timeout=self._timeout)
        records: list[CollectionRecord] = []
        for mname in mnames:
            name = mname[len(self._prefix) :]
            if not mname.startswith(self._prefix) or not is_collection_name(name):
                continue
            record = self._describe_if_ours(name)
            if record is not None:
                records.append(record)
        return sorted(records, key=lambda r: r.name)

    def _describe_if_ours(self, name: str) -> CollectionRecord | None:
        try:
            return self.get_collection(name)
        except RagrailError as exc:
            if exc.grpc_code == grpc.StatusCode.NOT_FOUND:
                return None  # dropped since it was listed, or not one of ours
            raise

    def _delete_collection(self, name: str) -> None:
        mname = self._mname(name)
        with self._write_lock, self._errors("deleting the collection", name):
            # drop_collection succeeds on a missing collection; the caller must hear NotFound.
            if not self._client.has_collection(mname, timeout=self._timeout):
                raise collection_not_found(name)
            self._client.drop_collection(mname, timeout=self._timeout)
        self._forget(name)

    def count(self, name: str) -> tuple[int, int]:
        self._open(name)
        self._flush_if_dirty(name)
        mname = self._mname(name)
        rows = self._read(
            name,
            "counting chunks",
            lambda: self._client.query(
                mname, filter="", output_fields=["count(*)"], timeout=self._timeout
            ),
        )
        return int(rows[0]["count(*)"]), len(self._document_heads(name, ["document_id"]))

    def upsert(self, name: str, chunks: list[ChunkRecord]) -> int:
        dimension = self._open(name)
        rows = rows_of(chunks, dimension, name, self._analyzer, self._mirrored.get(name, {}))
        mname = self._mname(name)
        with self._write_lock:
            self._mark_dirty(name)
            for start in range(0, len(rows), UPSERT_BATCH):
                with self._errors("upserting chunks", name):
                    self._client.upsert(
                        mname, rows[start : start + UPSERT_BATCH], timeout=self._timeout
                    )
        return len(rows)

    def delete_stale_chunks(self, name: str, document_ids: list[str], keep_ids: list[str]) -> int:
        self._open(name)
        keep = set(keep_ids)
        with self._write_lock:
            stale = [i for i in self._chunk_ids(name, document_ids) if i not in keep]
            self._delete_ids(name, stale)
        return len(stale)

    def delete_documents(self, name: str, document_ids: list[str]) -> int:
        self._open(name)
        with self._write_lock:
            ids = self._chunk_ids(name, document_ids)
            self._delete_ids(name, ids)
        return len(ids)

    def _list_documents(
        self, name: str, limit: int, offset: int
    ) -> tuple[list[DocumentRecord], int]:
        self._open(name)
        self._flush_if_dirty(name)
        heads = self._document_heads(name, ["document_id", "document_name", "metadata"])
        page = [heads[i] for i in sorted(heads)[offset : offset + limit]]
        counts = Counter(
            row["document_id"]
            for row in self._chunk_rows(name, [h["document_id"] for h in page], ["document_id"])
        )
        documents = [
            DocumentRecord(
                id=h["document_id"],
                name=h.get("document_name") or "",
                num_chunks=counts[h["document_id"]],
                metadata=dict(h.get("metadata") or {}),
            )
            for h in page
        ]
        return documents, len(heads)

    def _dense_search(self, search: SearchRequest, query: list[float]) -> list[ScoredChunk]:
        hits = self._search(search, "searching by vector", query, "vector", "COSINE")
        # COSINE distance in Milvus is the similarity itself, larger is better.
        return [ScoredChunk(chunk_of(hit), float(hit["distance"])) for hit in hits]

    def _sparse_search(self, search: SearchRequest, terms: list[str]) -> list[ScoredChunk]:
        # The query as the analysed text Milvus indexed (LexicalAnalyzer.index_text).
        hits = self._search(search, "searching by text", " ".join(terms), "sparse", "BM25")
        # Lite reports -score as the distance, a server the score; both list best first.
        return [ScoredChunk(chunk_of(hit), abs(float(hit["distance"]))) for hit in hits]

    def _search(
        self, search: SearchRequest, action: str, data: Any, field: str, metric: str
    ) -> list[Any]:
        name = search.collection
        params: dict[str, Any] = {"metric_type": metric}
        if metric == "COSINE":
            params["params"] = search_params(self._index_type, search.k)
        self._flush_if_dirty(name)
        results = self._read(
            name,
            action,
            lambda: self._client.search(
                self._mname(name),
                data=[data],
                anns_field=field,
                limit=search.k,
                filter=self._filter_expr(search),
                output_fields=output_fields(search.include_vectors),
                search_params=params,
                timeout=self._timeout,
            ),
        )
        return list(results[0])

    def _filter_expr(self, search: SearchRequest) -> str:
        if search.flt is None:
            return ""
        return to_milvus_expr(search.flt, self._mirrored.get(search.collection))

    def close(self) -> None:
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._client.close()
            except Exception as exc:  # closing must not mask why the service is stopping
                log.debug("closing the Milvus client failed: %s", exc)
            if self._is_lite:
                lite.release(self._lite_path)

    # -- reading and deleting rows -----------------------------------------------------

    def _query_all(self, name: str, expr: str, fields: list[str]) -> list[dict[str, Any]]:
        """Every row matching expr."""
        if self._is_lite:
            # Lite has no row cap on a plain query, and its iterator costs an extra query per
            # call and logs a warning (no MVCC timestamp) every time.
            return self._read(
                name,
                "reading chunks",
                lambda: list(
                    self._client.query(
                        self._mname(name), filter=expr, output_fields=fields, timeout=self._timeout
                    )
                ),
            )
        return self._read(
            name,
            "reading chunks",
            lambda: iterate_rows(self._client, self._mname(name), expr, fields, self._timeout),
        )

    def _document_heads(self, name: str, fields: list[str]) -> dict[str, dict[str, Any]]:
        """Chunk 0 of every document, by document id. The writer gives every document a
        chunk 0, so this reads one row per document, not every chunk."""
        heads: dict[str, dict[str, Any]] = {}
        for row in self._query_all(name, "chunk_index == 0", fields):
            heads.setdefault(row["document_id"], row)
        return heads

    def _chunk_rows(
        self, name: str, document_ids: list[str], fields: list[str]
    ) -> list[dict[str, Any]]:
        unique = list(dict.fromkeys(document_ids))
        # An id no Milvus string literal can hold (a control character, stored before the
        # servicer refused such ids) is found by a scan instead: those documents must still
        # list and delete, or a collection holding one is stuck.
        quotable, unquotable = split_quotable(unique)
        rows: list[dict[str, Any]] = []
        for start in range(0, len(quotable), DOCUMENT_BATCH):
            expr = f"document_id in {string_list(quotable[start : start + DOCUMENT_BATCH])}"
            rows.extend(self._query_all(name, expr, fields))
        if unquotable:
            wanted = list(dict.fromkeys([*fields, "document_id"]))
            scanned = self._query_all(name, "chunk_index >= 0", wanted)
            rows.extend(r for r in scanned if r["document_id"] in unquotable)
        return rows

    def _chunk_ids(self, name: str, document_ids: list[str]) -> list[str]:
        return [row["id"] for row in self._chunk_rows(name, document_ids, ["id"])]

    def _delete_ids(self, name: str, ids: list[str]) -> None:
        """Deletes with its own escaped `id in [...]` filter: `delete(ids=...)` pastes ids
        between quotes without escaping them, and returns no count on either engine."""
        if not ids:
            return
        self._mark_dirty(name)
        for start in range(0, len(ids), DELETE_BATCH):
            expr = f"id in {string_list(ids[start : start + DELETE_BATCH])}"
            with self._errors("deleting chunks", name):
                self._client.delete(self._mname(name), filter=expr, timeout=self._timeout)
