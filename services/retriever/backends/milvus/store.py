"""Milvus backend: one Milvus collection per ragrail collection, through `pymilvus.MilvusClient`.

The uri is either a Milvus Lite path ending in `.db` or a Milvus server (http://host:19530);
both take the same code path. Each collection holds the chunk columns, a dense `vector`
(COSINE) and a `sparse` vector that Milvus's own BM25 Function derives from `text`.

Found by experiment with pymilvus 3.0.2 and milvus-lite 3.2.2 (not assumed):

- Milvus Lite 3 is a pure-Python engine that serves the Milvus gRPC protocol from a thread of
  this process. The `.db` path is a directory (parquet segments, a WAL, a LOCK file). Only one
  process can open it: a second one gets "Open local milvus failed" (DataDirLockedError in the
  log). `MilvusClient.close()` does not let go of it, so `close()` here also stops the
  in-process server once no other store of this process uses the path.
- Analyzer: Lite accepts only the tokenizers 'standard' and 'jieba' ({"type": "english"} is
  rejected). Its standard tokenizer is `\\w+` plus lowercasing; of the filters it applies
  only {"type": "stop", "stop_words": [...]} with literal words: "_english_" is taken as the
  word "_english_", and "lowercase" and "stemmer" entries are accepted but ignored. So Lite
  has no stemming ("run" does not find "running") while a server would stem. The store
  therefore analyses text itself (services/retriever/analysis.py: stop words, Snowball
  stemmer) into a `terms` field that Milvus's BM25 function indexes with the plain standard
  tokenizer, and analyses queries the same way: identical ranking on Lite and on a server.
- BM25 on Lite: the distance is the negated score (a server returns the score), and IDF and
  average length are computed per segment. Rows not yet flushed sit in a memtable whose
  indexes are rebuilt on every search: on 5,000 rows a BM25 search took 1.5 s before a flush
  and 13 ms after, a dense one 230 ms and 23 ms. Flushing after every write halves ingest
  speed, so on Lite a store flushes a collection before the first read after a write. On a
  server, collections are created with Strong consistency and never flushed by hand.
- Lite loads nothing on startup: after reopening the path, search and query fail with
  "state 'released'" until load_collection, so a store loads each collection on first use.
  Once, in a compose test that SIGKILLs the retriever, a search right after the restart still
  met "released" although the collection had been opened; so a read that meets it loads the
  collection and tries once more (_read) rather than answering 500.
- Lite drops the schema description; collection properties survive reopening, so the
  description and creation time are kept there.
- Lite accepts `in [...]` only on plain columns, not on `metadata["k"]`: see filters.py.
- `drop_collection` of a missing collection succeeds silently, `delete` returns no count on
  either engine, and `delete(ids=...)`/`get(ids=...)` paste ids between single quotes without
  escaping them; so this module checks existence itself, counts by querying ids first, and
  deletes with its own escaped `id in [...]` filter.
- pymilvus logs a traceback at ERROR for every failed call before raising it; the errors are
  turned into domain errors here, so those records are dropped (see _QuietRpcErrors).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

import grpc
import pymilvus
from pymilvus import DataType, Function, FunctionType, MilvusClient
from pymilvus.client.types import LoadState
from pymilvus.exceptions import ConnectionConfigException, ErrorCode, MilvusException

from services.retriever.analysis import LexicalAnalyzer
from services.retriever.backends.base import (
    ChunkRecord,
    CollectionRecord,
    DocumentRecord,
    ScoredChunk,
    VectorStore,
    collection_not_found,
)
from services.retriever.backends.validation import (
    MAX_TOP_K,
    FieldLimits,
    check_choice,
    check_chunk,
    check_new_collection,
    check_page,
    check_query_vector,
    is_collection_name,
    validate_collection_name,
    validate_top_k,
)
from services.retriever.filters import (
    MetadataFilter,
    quote_string,
    string_list,
    to_milvus_expr,
)
from shared.errors import (
    AlreadyExists,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    RagrailError,
    ResourceExhausted,
    Unavailable,
)

if TYPE_CHECKING:
    from services.retriever.settings import RetrieverSettings


def _quotable(value: str) -> bool:
    """Whether `value` can be written as a Milvus string literal (quote_string's rule)."""
    try:
        quote_string(value)
    except InvalidArgument:
        return False
    return True


_T = TypeVar("_T")
log = logging.getLogger(__name__)

# The `terms` field holds text already analysed by LexicalAnalyzer; Milvus only splits it.
TERMS_ANALYZER_PARAMS: dict[str, Any] = {"tokenizer": "standard"}

# Build parameters per dense index type; the search parameters go with them.
INDEX_BUILD_PARAMS: dict[str, dict[str, Any]] = {
    "AUTOINDEX": {},
    "FLAT": {},
    "HNSW": {"M": 16, "efConstruction": 200},
    "IVF_FLAT": {"nlist": 128},
}
# VARCHAR limits are in bytes on a Milvus server, so they are checked on UTF-8 bytes here.
MAX_ID_BYTES = 2_048
MAX_NAME_BYTES = 4_096
MAX_TEXT_BYTES = 65_535
MAX_METADATA_BYTES = 65_536
LIMITS = FieldLimits(
    store="Milvus",
    id_bytes=MAX_ID_BYTES,
    name_bytes=MAX_NAME_BYTES,
    text_bytes=MAX_TEXT_BYTES,
    metadata_bytes=MAX_METADATA_BYTES,
)
UPSERT_BATCH = 512  # rows per call: keeps one gRPC message far below its size limit
DELETE_BATCH = 1_024  # ids per `id in [...]` expression
DOCUMENT_BATCH = 256  # document ids per `document_id in [...]` expression
QUERY_BATCH = 4_096  # rows per query-iterator page

_PROP_DESCRIPTION = "ragrail.description"
_PROP_CREATED_AT = "ragrail.created_at"
_PROP_SCHEMA = "ragrail.schema_version"
_PROP_ANALYZER = "ragrail.analyzer"
_SCHEMA_VERSION = "2"
_OUTPUT_FIELDS = ["id", "document_id", "document_name", "chunk_index", "text", "metadata"]
_PREFIX_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_CONNECT_CODES = {2, grpc.StatusCode.UNAVAILABLE}  # 2: pymilvus's "cannot connect"
_CREATING = "creating the collection"
_DEADLINE_CODES = {grpc.StatusCode.DEADLINE_EXCEEDED}


class _QuietRpcErrors(logging.Filter):
    """Drops pymilvus's traceback-per-failed-call records: the caller gets a domain error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.funcName != "_log_rpc_error"


class _NoRecoveryTracebacks(logging.Filter):
    """Keeps pymilvus's one-line "Connection recovery failed" warning, minus its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.funcName == "_recover":
            record.exc_info = None
            record.exc_text = None
        return True


logging.getLogger("pymilvus.decorators").addFilter(_QuietRpcErrors())
logging.getLogger("pymilvus.client.connection_manager").addFilter(_NoRecoveryTracebacks())


# -- Milvus Lite servers shared within this process ------------------------------------

_lite_lock = threading.Lock()
_lite_users: dict[str, int] = {}


def _lite_acquire(path: str) -> None:
    with _lite_lock:
        _lite_users[path] = _lite_users.get(path, 0) + 1


def _lite_release(path: str) -> None:
    # pymilvus runs one Lite server per path per process; stopping it while another store
    # still uses it would break that store, hence the count.
    with _lite_lock:
        users = _lite_users.get(path, 0) - 1
        if users > 0:
            _lite_users[path] = users
            return
        _lite_users.pop(path, None)
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(path)


class MilvusStore(VectorStore):
    name = "milvus"

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
        _check_options(uri, timeout_s, index_type, collection_prefix)
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
        if self._is_lite:
            return self._uri
        parsed = urlparse(self._uri)
        if parsed.username or parsed.password:
            host = parsed.hostname or ""
            netloc = f"{host}:{parsed.port}" if parsed.port else host
            return parsed._replace(netloc=netloc).geturl()
        return self._uri

    def _connect(self, token: str) -> MilvusClient:
        if self._is_lite:
            self._prepare_lite_path()
        try:
            client = MilvusClient(
                uri=self._uri, token=token, db_name=self._db_name, timeout=self._timeout
            )
        except MilvusException as exc:
            raise self._connect_error(exc) from exc
        if self._is_lite:
            _lite_acquire(self._lite_path)
        return client

    def _prepare_lite_path(self) -> None:
        path = Path(self._uri)
        if path.is_file():
            raise Unavailable(
                f"{self._uri} is a file, but Milvus Lite 3 keeps its data in a directory of "
                "that name (the file was probably written by Milvus Lite 2, which this "
                "version cannot read); move it away or choose another RAGRAIL_RETRIEVER_MILVUS_URI"
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Unavailable(
                f"cannot create the directory for Milvus Lite data {self._uri}: {exc}; "
                "choose a writable RAGRAIL_RETRIEVER_MILVUS_URI"
            ) from exc

    def _connect_error(self, exc: MilvusException) -> Unavailable:
        if self._is_lite:
            return Unavailable(
                f"cannot open Milvus Lite data at {self._uri} ({exc.message}); only one "
                "process can use it at a time: stop the other one, or run a Milvus server "
                "and set RAGRAIL_RETRIEVER_MILVUS_URI to it"
            )
        return Unavailable(
            f"cannot connect to Milvus at {self.display_uri} ({exc.message}); check that it "
            "is running and that RAGRAIL_RETRIEVER_MILVUS_URI and the token are right"
        )

    @contextmanager
    def _errors(self, action: str, collection: str | None = None) -> Iterator[None]:
        """Turns pymilvus and gRPC failures of `action` into domain errors."""
        if self._closed:
            raise Unavailable("the Milvus store is closed; the retriever is shutting down")
        try:
            yield
        except MilvusException as exc:
            raise self._domain_error(exc, action, collection) from exc
        except grpc.RpcError as exc:
            raise Unavailable(
                f"Milvus at {self.display_uri} failed while {action} ({exc.code().name}); "
                "check that it is running"
            ) from exc

    def _domain_error(
        self, exc: MilvusException, action: str, collection: str | None
    ) -> RagrailError:
        message = exc.message or str(exc)
        lowered = message.lower()
        if collection is not None and _is_not_found(exc.code, lowered):
            self._forget(collection)
            return collection_not_found(collection)
        if action == _CREATING and "already exist" in lowered:
            return AlreadyExists(
                f"collection '{collection}' already exists; delete it first or choose another name"
            )
        if exc.code == ErrorCode.RATE_LIMIT:
            return ResourceExhausted(f"Milvus is rate-limiting {action}; retry in a moment")
        # The code comes before the text: pymilvus reports a server that stayed down as
        # "Retry timeout" with code UNAVAILABLE.
        if isinstance(exc, ConnectionConfigException) or exc.code in _CONNECT_CODES:
            return self._unreachable(action, message)
        if exc.code in _DEADLINE_CODES or "timeout" in lowered or "deadline" in lowered:
            return DeadlineExceeded(
                f"Milvus at {self.display_uri} did not finish {action} within "
                f"{self._timeout:g} s; retry, or raise RAGRAIL_RETRIEVER_MILVUS_TIMEOUT_S"
            )
        if "connect" in lowered or "unavailable" in lowered:
            return self._unreachable(action, message)
        log.warning("Milvus failed while %s: %s", action, message)
        return RagrailError(f"Milvus failed while {action}: {message}")

    def _unreachable(self, action: str, message: str) -> Unavailable:
        return Unavailable(
            f"cannot reach Milvus at {self.display_uri} while {action} ({message}); "
            "check that it is running"
        )

    # -- collection bookkeeping --------------------------------------------------------

    def _mname(self, name: str) -> str:
        return self._prefix + name

    def _forget(self, name: str) -> None:
        self._known.pop(name, None)
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
        dimension = _dimension(info)
        if dimension is None:
            raise collection_not_found(name)  # a foreign collection that shares the prefix
        built_with = (info.get("properties") or {}).get(_PROP_ANALYZER)
        if built_with != self._analyzer.signature:
            raise FailedPrecondition(
                f"collection '{name}' was indexed with text analysis '{built_with}', but this "
                f"retriever analyses '{self._analyzer.signature}'; BM25 would miss terms. "
                "Set the retriever's bm25_language back, or re-create the collection and "
                "ingest again"
            )
        self._known[name] = dimension
        return dimension

    def _load(self, mname: str) -> None:
        with self._load_lock:
            state = self._client.get_load_state(mname, timeout=self._timeout)
            if state.get("state") != LoadState.Loaded:
                self._client.load_collection(mname, timeout=self._timeout)

    def _read(self, name: str, action: str, call: Callable[[], _T]) -> _T:
        """Runs the read `call`; a collection found released is loaded and read once more."""
        with self._errors(action, name):
            try:
                return call()
            except MilvusException as exc:
                if not _is_released(exc):
                    raise
                log.warning("collection '%s' was released while %s; loading it again", name, action)
                self._load(self._mname(name))
                return call()

    def _flush_if_dirty(self, name: str) -> None:
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
        facts = {
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
        return facts

    def create_collection(
        self, name: str, dimension: int, description: str = ""
    ) -> CollectionRecord:
        validate_collection_name(name)
        check_new_collection(dimension, description)
        mname = self._mname(name)
        created_at = time.time()
        with self._write_lock, self._errors(_CREATING, name):
            if self._client.has_collection(mname, timeout=self._timeout):
                raise AlreadyExists(
                    f"collection '{name}' already exists; delete it first or choose another name"
                )
            self._client.create_collection(
                mname,
                schema=self._schema(dimension),
                properties={
                    _PROP_DESCRIPTION: description,
                    _PROP_CREATED_AT: repr(created_at),
                    _PROP_SCHEMA: _SCHEMA_VERSION,
                    _PROP_ANALYZER: self._analyzer.signature,
                },
                consistency_level="Strong",  # counts and reads see every finished write
                timeout=self._timeout,
            )
            # Passing index_params to create_collection would wait for the (empty) indexes
            # by polling every 0.5 s through AllocTimestamp, which Lite does not implement
            # and logs a traceback for; an empty collection has nothing to wait for.
            try:
                self._client.create_index(
                    mname, self._index_params(), timeout=self._timeout, sync=False
                )
                self._client.load_collection(mname, timeout=self._timeout)
            except MilvusException:
                # A collection without its indexes can be neither loaded nor searched.
                with suppress(MilvusException):
                    self._client.drop_collection(mname, timeout=self._timeout)
                raise
        self._known[name] = dimension
        return CollectionRecord(name, dimension, description, created_at)

    def get_collection(self, name: str) -> CollectionRecord:
        validate_collection_name(name)
        with self._errors("describing the collection", name):
            info = self._client.describe_collection(self._mname(name), timeout=self._timeout)
        record = _collection_record(name, info)
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

    def delete_collection(self, name: str) -> None:
        validate_collection_name(name)
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
        rows = _rows(chunks, dimension, name, self._analyzer)
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

    def list_documents(
        self, name: str, limit: int, offset: int
    ) -> tuple[list[DocumentRecord], int]:
        check_page(limit, offset)
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

    def dense_search(
        self,
        name: str,
        vector: list[float],
        k: int,
        flt: MetadataFilter | None,
        include_vectors: bool = False,
    ) -> list[ScoredChunk]:
        dimension = self._open(name)
        validate_top_k(k, MAX_TOP_K)
        query = check_query_vector(vector, dimension, name)
        self._flush_if_dirty(name)
        results = self._read(
            name,
            "searching by vector",
            lambda: self._client.search(
                self._mname(name),
                data=[query],
                anns_field="vector",
                limit=k,
                filter=to_milvus_expr(flt) if flt else "",
                output_fields=_fields(include_vectors),
                search_params={"metric_type": "COSINE", "params": self._search_params(k)},
                timeout=self._timeout,
            ),
        )
        # COSINE distance in Milvus is the similarity itself, larger is better.
        return [ScoredChunk(_chunk(hit), float(hit["distance"])) for hit in results[0]]

    def sparse_search(
        self,
        name: str,
        text: str,
        k: int,
        flt: MetadataFilter | None,
        include_vectors: bool = False,
    ) -> list[ScoredChunk]:
        self._open(name)
        validate_top_k(k, MAX_TOP_K)
        terms = self._analyzer.index_text(text)
        if not terms:
            return []  # only stop words: nothing for BM25 to match
        self._flush_if_dirty(name)
        results = self._read(
            name,
            "searching by text",
            lambda: self._client.search(
                self._mname(name),
                data=[terms],
                anns_field="sparse",
                limit=k,
                filter=to_milvus_expr(flt) if flt else "",
                output_fields=_fields(include_vectors),
                search_params={"metric_type": "BM25"},
                timeout=self._timeout,
            ),
        )
        # Lite reports -score as the distance, a server the score; both list best first.
        return [ScoredChunk(_chunk(hit), abs(float(hit["distance"]))) for hit in results[0]]

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
                _lite_release(self._lite_path)

    # -- helpers that talk to Milvus ---------------------------------------------------

    def _schema(self, dimension: int) -> Any:
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=MAX_ID_BYTES)
        schema.add_field("document_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
        schema.add_field("document_name", DataType.VARCHAR, max_length=MAX_NAME_BYTES)
        schema.add_field("chunk_index", DataType.INT64)
        schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
        schema.add_field(
            "terms",
            DataType.VARCHAR,
            max_length=MAX_TEXT_BYTES,
            enable_analyzer=True,
            analyzer_params=TERMS_ANALYZER_PARAMS,
        )
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_field("metadata", DataType.JSON)
        schema.add_function(
            Function(
                name="text_bm25",
                function_type=FunctionType.BM25,
                input_field_names=["terms"],
                output_field_names=["sparse"],
            )
        )
        return schema

    def _index_params(self) -> Any:
        params = self._client.prepare_index_params()
        params.add_index(
            field_name="vector",
            index_type=self._index_type,
            metric_type="COSINE",
            params=INDEX_BUILD_PARAMS[self._index_type],
        )
        params.add_index(
            field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25"
        )
        return params

    def _search_params(self, k: int) -> dict[str, Any]:
        if self._index_type == "HNSW":
            return {"ef": max(k, 64)}  # ef below k would return fewer than k hits
        if self._index_type == "IVF_FLAT":
            return {"nprobe": 16}
        return {}

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
        return self._read(name, "reading chunks", lambda: self._iterate(name, expr, fields))

    def _iterate(self, name: str, expr: str, fields: list[str]) -> list[dict[str, Any]]:
        # A server caps a plain query at 16,384 rows; the iterator pages past that.
        rows: list[dict[str, Any]] = []
        iterator = self._client.query_iterator(
            self._mname(name),
            batch_size=QUERY_BATCH,
            filter=expr,
            output_fields=fields,
            timeout=self._timeout,
        )
        try:
            while batch := iterator.next():
                rows.extend(batch)
        finally:
            iterator.close()
        return rows

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
        unquotable = {i for i in unique if not _quotable(i)}
        quotable = [i for i in unique if i not in unquotable]
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
        if not ids:
            return
        self._mark_dirty(name)
        for start in range(0, len(ids), DELETE_BATCH):
            expr = f"id in {string_list(ids[start : start + DELETE_BATCH])}"
            with self._errors("deleting chunks", name):
                self._client.delete(self._mname(name), filter=expr, timeout=self._timeout)


# -- pure helpers ----------------------------------------------------------------------


def _check_options(uri: str, timeout_s: float, index_type: str, prefix: str) -> None:
    if not uri:
        raise InvalidArgument(
            "the Milvus uri is empty; set RAGRAIL_RETRIEVER_MILVUS_URI to a path ending in "
            ".db (Milvus Lite) or to http://host:19530"
        )
    if not timeout_s > 0:
        raise InvalidArgument(f"the Milvus timeout must be positive, got {timeout_s}")
    check_choice("Milvus index type", index_type, INDEX_BUILD_PARAMS)
    if prefix and not _PREFIX_RE.fullmatch(prefix):
        raise InvalidArgument(
            f"collection prefix {prefix!r} is invalid: use letters, digits and '_', "
            "not starting with a digit"
        )


def _is_released(exc: MilvusException) -> bool:
    message = (exc.message or str(exc)).lower()
    return "released" in message or "not loaded" in message


def _is_not_found(code: Any, lowered_message: str) -> bool:
    if code == ErrorCode.COLLECTION_NOT_FOUND:
        return True
    return "collection" in lowered_message and (
        "not exist" in lowered_message or "not found" in lowered_message
    )


def _dimension(info: dict[str, Any]) -> int | None:
    for field in info.get("fields", []):
        if field.get("name") == "vector" and "dim" in field.get("params", {}):
            return int(field["params"]["dim"])
    return None


def _collection_record(name: str, info: dict[str, Any]) -> CollectionRecord | None:
    dimension = _dimension(info)
    if dimension is None:
        return None
    props = info.get("properties") or {}
    try:
        created_at = float(props.get(_PROP_CREATED_AT, 0.0))
    except ValueError:
        created_at = 0.0
    return CollectionRecord(name, dimension, props.get(_PROP_DESCRIPTION, ""), created_at)


def _fields(include_vectors: bool) -> list[str]:
    return [*_OUTPUT_FIELDS, "vector"] if include_vectors else list(_OUTPUT_FIELDS)


def _chunk(hit: Any) -> ChunkRecord:
    entity = hit["entity"]
    vector = entity.get("vector")
    return ChunkRecord(
        id=str(hit["id"]),
        document_id=entity.get("document_id", ""),
        text=entity.get("text", ""),
        vector=[float(x) for x in vector] if vector is not None else [],
        metadata=dict(entity.get("metadata") or {}),
        document_name=entity.get("document_name") or "",
        chunk_index=int(entity.get("chunk_index") or 0),
    )


def _rows(
    chunks: list[ChunkRecord], dimension: int, name: str, analyzer: LexicalAnalyzer
) -> list[dict[str, Any]]:
    # Milvus servers reject a batch that repeats a primary key; the last copy wins here,
    # as it would with two upserts in a row.
    by_id = {chunk.id: _row(chunk, dimension, name, analyzer) for chunk in chunks}
    return list(by_id.values())


def _row(
    chunk: ChunkRecord, dimension: int, name: str, analyzer: LexicalAnalyzer
) -> dict[str, Any]:
    checked = check_chunk(chunk, dimension, name, LIMITS)
    return {
        "id": chunk.id,
        "document_id": chunk.document_id,
        "document_name": chunk.document_name,
        "chunk_index": int(chunk.chunk_index),
        "text": chunk.text,
        # Never longer than the text: stems are no longer than words, stop words are dropped.
        "terms": analyzer.index_text(chunk.text),
        "vector": checked.vector,
        "metadata": chunk.metadata,  # a JSON field: Milvus takes the object itself
    }
