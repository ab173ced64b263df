"""FAISS backend: dense search with FAISS and BM25 with bm25s, in this process, on local files.

What it is for: one retriever process without a Milvus server or Milvus Lite — a laptop, CI,
a single box — with exact (`flat`) or approximate (`hnsw`, `ivf`) dense search, optionally on
a GPU, and BM25 that ranks like the Milvus backend (same analysed terms, same formula).

Files under `directory` (RAGRAIL_RETRIEVER_FAISS_DIR):

    LOCK                                  flock'ed by the one process using the directory
    <collection>/chunks.sqlite            the source of truth: collection info and every chunk
                                          (text, analysed terms, metadata, normalised vector)
    <collection>/index-<kind>-g<N>.faiss  the dense index as of write generation N
    <collection>/.index-*.tmp             only while an index file is being written

Crash safety. Every write (upsert, delete) is one SQLite transaction (WAL, synchronous=FULL)
that also bumps the collection's write generation, so an acknowledged write survives a crash
and a half-done one is rolled back. The FAISS index is a cache of the vectors in SQLite. Its
file is written to a temporary name in the same directory, fsynced and `os.replace`d into
place, so no reader ever sees half a file; it carries the generation it reflects (in its name
and in a header) and a SHA-256 trailer. On open, an index file that is missing, of another
generation (a crash between the commit and the index write), damaged (checksum), or that
disagrees with the table in size or kind is ignored and the index is rebuilt from the stored
vectors. A generation number rather than file times: mtimes are coarse, survive copies badly
and can go backwards with the clock.

Index files are written at most every `save_interval_s` after writes, and on close, not after
every upsert: a full index file per batch would make a long ingest quadratic in its size. A
crash therefore costs a rebuild on the next open, never data.

Index types (all inner product on L2-normalised vectors, i.e. cosine similarity):

- `flat`: IndexIDMap2(IndexFlatIP), exact. Deletes and replacements are applied in place.
- `hnsw`: IndexIDMap2(IndexHNSWFlat). HNSW cannot remove vectors, so a delete or a
  replacement marks the index dirty and it is rebuilt from the stored vectors before the next
  search. Trade-off: inserts stay cheap and searches fast, but the first search after a
  delete pays a full rebuild (2.4-2.8 s for 10,000 x 384 with M=32 on this project's shared
  2-core machine); fine for ingest-then-query workloads, poor for a stream of deletes mixed
  with searches (use `flat` or `ivf` there). Writes never rebuild it themselves.
- `ivf`: IndexIVFFlat, trained on the stored vectors once the collection holds at least
  `ivf_min_train` of them (39 x nlist by default, faiss's own minimum for stable centroids);
  below that the index is exact flat. Centroids are not retrained as the collection grows;
  a rebuild (after a crash, or a change of index type) retrains them.

Changing `index_type` (or hnsw_m / ivf_nlist) for an existing directory is safe: the file
name records the kind, so a mismatching file is ignored and the index is rebuilt.

Filtered dense search deepens progressively: it asks the index for k*4, k*16, ... candidates
and filters them in Python (`filters.matches`, on rows read without their text) until k
match or every vector was considered; the last step is exact for every index type (flat: the
whole index; ivf: every list is probed; hnsw: a brute-force pass over HNSW's own flat
storage). Chosen over an IDSelectorBatch in SearchParameters because it works unchanged on
every index type and on GPU indexes (which do not take ID selectors), needs no id list built
per query from a scan of every chunk's metadata, and HNSW's recall drops with selective
selectors, while a selective filter here only costs more (exact) depth.

Sparse search: bm25s over `LexicalAnalyzer.terms` of each chunk, the same terms the Milvus
backend indexes. bm25s has no incremental update, so the BM25 index is rebuilt from the
stored terms on the first sparse search after a write: 1.2-1.3 s for 10,000 chunks of 150-250
words (1.4 M terms) here, about 0.3 s of it reading and splitting the terms. Writes in a row
cost one rebuild, at the next sparse search. bm25s's "lucene" method is Milvus's formula up
to a constant: IDF log(1 + (N - df + 0.5) / (df + 0.5)) and tf / (tf + k1 (1 - b + b
dl/avgdl)); Milvus multiplies the latter by (k1 + 1), so scores are multiplied by (k1 + 1)
here and equal Milvus's. k1=1.5, b=0.75 are Milvus Lite's defaults
(milvus_lite/index/sparse_factory.py), which the Milvus backend does not override. A
repeated query term counts once per repetition in both.

GPU: with use_gpu "auto" and `faiss.get_num_gpus() > 0`, flat and ivf indexes are copied to
every GPU with `faiss.index_cpu_to_all_gpus` for searching; the CPU index stays the master
that writes update and that is saved. The GPU copy is refreshed lazily after writes. Searches
deeper than faiss's GPU limit (k <= 2048) and exhaustive passes run on the CPU copy. HNSW has
no faiss GPU implementation and stays on the CPU. NOT VERIFIED: no GPU and no faiss-gpu build
were available where this was written; only the CPU paths are tested.

Threads: one RLock per collection serialises its writes, lazy rebuilds and searches (FAISS
indexes must not be searched while being modified); another guards the set of open
collections. Only one process may use a directory (LOCK): a second store would keep its own
in-memory index and silently diverge.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import re
import shutil
import sqlite3
import struct
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import bm25s
import faiss
import numpy as np

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
    check_choice,
    check_chunk,
    check_new_collection,
    check_page,
    check_query_vector,
    is_collection_name,
    validate_collection_name,
    validate_top_k,
)
from services.retriever.filters import MetadataFilter, matches
from shared.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    RagrailError,
    ResourceExhausted,
    Unavailable,
)

if TYPE_CHECKING:
    from services.retriever.settings import RetrieverSettings

log = logging.getLogger(__name__)

IndexType = Literal["flat", "hnsw", "ivf"]
GpuMode = Literal["auto", "never", "always"]
INDEX_TYPES: tuple[str, ...] = ("flat", "hnsw", "ivf")
GPU_MODES: tuple[str, ...] = ("auto", "never", "always")

# Lite's defaults, which the Milvus backend does not override (see the module docstring).
BM25_K1 = 1.5
BM25_B = 0.75
# faiss's k-means warns below 39 training points per centroid.
IVF_POINTS_PER_CENTROID = 39
# faiss GPU indexes select at most this many results per query (CUDA builds).
GPU_MAX_K = 2_048
SQL_BATCH = 500  # parameters per `IN (...)`; far below SQLite's limit
DB_FILE = "chunks.sqlite"
LOCK_FILE = "LOCK"
_SCHEMA_VERSION = "1"
_INDEX_MAGIC = b"ragrail-faiss-index\x00v1\x00"
_INDEX_FILE_RE = re.compile(r"index-(?P<kind>[a-z0-9]+)-g(?P<gen>\d+)\.faiss")


@dataclass
class _Bm25:
    model: Any  # bm25s.BM25, or None when no chunk has a single term
    fids: np.ndarray  # corpus position -> FAISS id
    generation: int


@dataclass
class _Collection:
    """One open collection. Every field is guarded by `lock`."""

    name: str
    path: Path
    db: sqlite3.Connection
    record: CollectionRecord
    analyzer: str
    generation: int
    lock: threading.RLock = field(default_factory=threading.RLock)
    closed: bool = False
    index: Any = None  # CPU faiss index; None until loaded or built, or after a dirtying write
    index_generation: int = -1
    gpu_index: Any = None  # search copy on the GPUs, rebuilt lazily after changes
    saved_generation: int = -1
    saved_at: float = field(default_factory=time.monotonic)
    bm25: _Bm25 | None = None


class FaissStore(VectorStore):
    name = "faiss"

    def __init__(
        self,
        directory: str,
        index_type: IndexType = "flat",
        analyzer: LexicalAnalyzer | None = None,
        use_gpu: GpuMode = "auto",
        hnsw_m: int = 32,
        hnsw_ef_construction: int = 40,
        hnsw_ef_search: int = 128,
        ivf_nlist: int = 256,
        ivf_nprobe: int = 16,
        ivf_min_train: int | None = None,
        bm25_k1: float = BM25_K1,
        bm25_b: float = BM25_B,
        save_interval_s: float = 10.0,
        search_threads: int = 1,
    ) -> None:
        _check_options(
            directory, index_type, use_gpu, hnsw_m, hnsw_ef_construction, hnsw_ef_search,
            ivf_nlist, ivf_nprobe, ivf_min_train, bm25_k1, bm25_b, save_interval_s,
            search_threads,
        )  # fmt: skip
        self._dir = Path(directory)
        self._index_type: IndexType = index_type
        self._analyzer = analyzer or LexicalAnalyzer()
        self._hnsw_m = hnsw_m
        self._hnsw_ef_construction = hnsw_ef_construction
        self._hnsw_ef_search = hnsw_ef_search
        self._ivf_nlist = ivf_nlist
        self._ivf_nprobe = min(ivf_nprobe, ivf_nlist)
        self._ivf_min_train = (
            ivf_min_train if ivf_min_train is not None else IVF_POINTS_PER_CENTROID * ivf_nlist
        )
        self._k1 = float(bm25_k1)
        self._b = float(bm25_b)
        self._save_interval = float(save_interval_s)
        # OpenMP threads per search and per build. One query gains nothing from a team of
        # threads and pays for waking it: on this project's shared 2-core machine a flat
        # search of 10k vectors took 20-30 ms with 2 threads and 0.6 ms with 1. Builds (HNSW
        # inserts, IVF training) do use the threads. libgomp keeps the setting per calling
        # thread, so each search or build sets it for the worker thread it runs on.
        self._search_threads = search_threads
        self._build_threads = max(1, faiss.omp_get_max_threads())
        self._use_gpu_mode = use_gpu
        self._gpu = self._resolve_gpu(use_gpu, index_type)
        self._lock = threading.RLock()  # guards _collections and collection create/delete
        self._collections: dict[str, _Collection] = {}
        self._closed = False
        # How often the index came from a file and how often it was rebuilt; tests read them.
        self.index_loads = 0
        self.index_builds = 0
        self.bm25_builds = 0
        self._lock_fd = self._prepare_directory()
        self._facts = self._describe()

    @classmethod
    def from_settings(cls, settings: RetrieverSettings) -> FaissStore:
        return cls(
            directory=settings.faiss_dir,
            index_type=settings.faiss_index,
            analyzer=LexicalAnalyzer(settings.bm25_language),
            use_gpu=settings.faiss_use_gpu,
        )

    # -- setup -------------------------------------------------------------------------

    @staticmethod
    def _resolve_gpu(mode: GpuMode, index_type: IndexType) -> bool:
        gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
        if mode == "never":
            return False
        if mode == "always":
            if gpus <= 0:
                raise FailedPrecondition(
                    "faiss_use_gpu is 'always' but faiss sees no GPU (faiss-cpu is installed, "
                    "or CUDA finds no device); install faiss-gpu on a GPU machine, or set "
                    "RAGRAIL_RETRIEVER_FAISS_USE_GPU=auto"
                )
            if index_type == "hnsw":
                raise FailedPrecondition(
                    "faiss_use_gpu is 'always' but faiss has no GPU HNSW index; set "
                    "RAGRAIL_RETRIEVER_FAISS_INDEX to flat or ivf, or "
                    "RAGRAIL_RETRIEVER_FAISS_USE_GPU=auto"
                )
            return True
        return gpus > 0 and index_type != "hnsw"

    def _prepare_directory(self) -> int:
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise Unavailable(
                f"cannot create the FAISS directory {self._dir}: {exc.strerror or exc}; "
                "choose a writable RAGRAIL_RETRIEVER_FAISS_DIR"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            who = f" (process {holder})" if holder else ""
            raise Unavailable(
                f"the FAISS directory {self._dir} is in use by another retriever{who}; only "
                "one process can use it at a time: stop the other one, or set "
                "RAGRAIL_RETRIEVER_FAISS_DIR to another directory"
            ) from exc
        with contextlib.suppress(OSError):  # the pid only helps the message above
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        # Leftovers of a crash while creating or deleting a collection.
        for entry in self._dir.iterdir():
            if entry.name.startswith((".creating-", ".deleting-")):
                shutil.rmtree(entry, ignore_errors=True)
        return fd

    def _describe(self) -> dict[str, str]:
        facts = {
            "directory": str(self._dir),
            "index_type": self._index_type,
            "gpu": "yes" if self._gpu else "no",
            "use_gpu": self._use_gpu_mode,
            "metric": "inner product on L2-normalised vectors (cosine)",
            "sparse": f"bm25s lucene, k1={self._k1:g}, b={self._b:g}, scores x(k1+1) as Milvus",
            "analyzer": self._analyzer.signature,
            "faiss": str(faiss.__version__),
            "bm25s": str(getattr(bm25s, "__version__", "unknown")),
        }
        if self._index_type == "hnsw":
            facts["hnsw_m"] = str(self._hnsw_m)
        if self._index_type == "ivf":
            facts["ivf_nlist"] = str(self._ivf_nlist)
            facts["ivf_nprobe"] = str(self._ivf_nprobe)
        return facts

    # -- errors ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, action: str, name: str | None = None) -> Iterator[None]:
        """Turns SQLite and file-system failures of `action` into domain errors."""
        if self._closed:
            raise Unavailable("the FAISS store is closed; the retriever is shutting down")
        try:
            yield
        except RagrailError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise self._domain_error(exc, action, name) from exc

    def _domain_error(self, exc: Exception, action: str, name: str | None) -> RagrailError:
        text = str(exc)
        lowered = text.lower()
        where = self._dir / name if name else self._dir
        if "disk is full" in lowered or getattr(exc, "errno", None) == 28:
            return ResourceExhausted(
                f"no space left on the disk of {where} while {action}; free some space and retry"
            )
        if "readonly" in lowered or "permission" in lowered or "read-only" in lowered:
            return Unavailable(
                f"cannot write {where} while {action} ({text}); check its permissions"
            )
        if "malformed" in lowered or "not a database" in lowered:
            return Unavailable(
                f"the data of collection '{name}' at {where} is damaged ({text}); restore it "
                "from a backup, or delete the collection and ingest again"
            )
        log.warning("the FAISS store failed while %s: %s", action, text)
        return RagrailError(f"the FAISS store failed while {action}: {text}")

    # -- collections on disk -----------------------------------------------------------

    def _collection(self, name: str) -> _Collection:
        """The open collection (opened on first use); NotFound if there is none."""
        validate_collection_name(name)
        with self._lock:
            if self._closed:
                raise Unavailable("the FAISS store is closed; the retriever is shutting down")
            coll = self._collections.get(name)
            if coll is not None:
                return coll
            path = self._dir / name
            if not (path / DB_FILE).is_file():
                raise collection_not_found(name)
            with self._errors("opening the collection", name):
                coll = self._connect(name, path)
            self._collections[name] = coll
            return coll

    def _open(self, name: str) -> _Collection:
        """`_collection` plus the check that BM25 terms are analysed the same way."""
        coll = self._collection(name)
        if coll.analyzer != self._analyzer.signature:
            raise FailedPrecondition(
                f"collection '{name}' was indexed with text analysis '{coll.analyzer}', but this "
                f"retriever analyses '{self._analyzer.signature}'; BM25 would miss terms. "
                "Set the retriever's bm25_language back, or re-create the collection and "
                "ingest again"
            )
        return coll

    @contextlib.contextmanager
    def _locked(self, coll: _Collection) -> Iterator[None]:
        with coll.lock:
            if coll.closed:  # deleted (or the store closed) while this call waited
                if self._closed:
                    raise Unavailable("the FAISS store is closed; the retriever is shutting down")
                raise collection_not_found(coll.name)
            yield

    @staticmethod
    def _connect(name: str, path: Path) -> _Collection:
        db = sqlite3.connect(path / DB_FILE, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # FULL: a commit that returned survives a power cut, not only a process crash.
            db.execute("PRAGMA synchronous=FULL")
            info = dict(db.execute("SELECT key, value FROM info").fetchall())
            if "dimension" not in info or "generation" not in info:
                raise sqlite3.DatabaseError("the collection info is incomplete (malformed)")
            if info.get("schema_version") != _SCHEMA_VERSION:
                raise FailedPrecondition(
                    f"collection '{name}' at {path} has storage version "
                    f"{info.get('schema_version')!r}, this retriever reads {_SCHEMA_VERSION!r}; "
                    "re-create the collection and ingest again"
                )
            record = CollectionRecord(
                name=name,
                dimension=int(info["dimension"]),
                description=info.get("description", ""),
                created_at=float(info.get("created_at", "0")),
            )
            return _Collection(
                name=name,
                path=path,
                db=db,
                record=record,
                analyzer=info.get("analyzer", ""),
                generation=int(info["generation"]),
            )
        except BaseException:
            db.close()
            raise

    # -- VectorStore: collections ------------------------------------------------------

    def describe(self) -> dict[str, str]:
        return dict(self._facts)

    def create_collection(
        self, name: str, dimension: int, description: str = ""
    ) -> CollectionRecord:
        validate_collection_name(name)
        check_new_collection(dimension, description)
        created_at = time.time()
        with self._lock, self._errors("creating the collection", name):
            path = self._dir / name
            if name in self._collections or path.exists():
                raise AlreadyExists(
                    f"collection '{name}' already exists; delete it first or choose another name"
                )
            # Built under a hidden name and renamed: a crash leaves no half-made collection.
            staging = self._dir / f".creating-{name}-{uuid.uuid4().hex}"
            staging.mkdir()
            try:
                _init_db(
                    staging / DB_FILE,
                    {
                        "schema_version": _SCHEMA_VERSION,
                        "name": name,
                        "dimension": str(dimension),
                        "description": description,
                        "created_at": repr(created_at),
                        "analyzer": self._analyzer.signature,
                        "generation": "0",
                        "next_fid": "1",
                    },
                )
                os.rename(staging, path)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            _fsync_dir(self._dir)
        return CollectionRecord(name, dimension, description, created_at)

    def get_collection(self, name: str) -> CollectionRecord:
        coll = self._collection(name)
        r = coll.record
        return CollectionRecord(r.name, r.dimension, r.description, r.created_at)

    def list_collections(self) -> list[CollectionRecord]:
        with self._errors("listing collections"):
            names = sorted(
                entry.name
                for entry in self._dir.iterdir()
                if is_collection_name(entry.name) and (entry / DB_FILE).is_file()
            )
        records: list[CollectionRecord] = []
        for name in names:
            with contextlib.suppress(RagrailError):  # deleted since listed, or unreadable
                records.append(self.get_collection(name))
        return records

    def delete_collection(self, name: str) -> None:
        validate_collection_name(name)
        with self._lock, self._errors("deleting the collection", name):
            path = self._dir / name
            if not (path / DB_FILE).is_file():
                raise collection_not_found(name)
            coll = self._collections.pop(name, None)
            if coll is not None:
                with coll.lock:
                    coll.closed = True
                    coll.db.close()
                    coll.index = coll.gpu_index = coll.bm25 = None
            # Renamed first so the collection disappears atomically, then removed.
            trash = self._dir / f".deleting-{name}-{uuid.uuid4().hex}"
            os.rename(path, trash)
            _fsync_dir(self._dir)
            shutil.rmtree(trash, ignore_errors=True)

    def count(self, name: str) -> tuple[int, int]:
        coll = self._open(name)
        with self._locked(coll), self._errors("counting chunks", name):
            chunks, documents = coll.db.execute(
                "SELECT COUNT(*), COUNT(DISTINCT document_id) FROM chunks"
            ).fetchone()
        return int(chunks), int(documents)

    # -- VectorStore: writing ----------------------------------------------------------

    def upsert(self, name: str, chunks: list[ChunkRecord]) -> int:
        coll = self._open(name)
        dimension = coll.record.dimension
        # The last copy of a repeated id wins, as with two upserts in a row.
        by_id = {chunk.id: _row(chunk, dimension, name, self._analyzer) for chunk in chunks}
        rows = list(by_id.values())
        if not rows:
            return 0
        vectors = np.stack([r.vector for r in rows])
        with self._locked(coll), self._errors("upserting chunks", name):
            existing = self._fids_of_ids(coll, [r.id for r in rows])
            # Loaded (flat/ivf: or rebuilt) before the write, so that the write is applied
            # to it in place and a clean shutdown can save it. An HNSW rebuild costs
            # seconds, so writes never trigger one: a replacement discards the index anyway,
            # and a dirty index waits for the next search.
            if self._index_type != "hnsw":
                self._ensure_index(coll, build=True)
            elif not existing:
                self._ensure_index(coll, build=False)
            next_fid = int(_info(coll.db, "next_fid"))
            fids: list[int] = []
            for r in rows:
                if r.id in existing:
                    fids.append(existing[r.id])
                else:
                    fids.append(next_fid)
                    next_fid += 1
            params = [(*r.columns(), fid) for r, fid in zip(rows, fids, strict=True)]
            with _transaction(coll.db):
                coll.db.executemany(
                    "INSERT INTO chunks (id, document_id, document_name, chunk_index, text, "
                    "terms, metadata, vector, fid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT(fid) DO UPDATE SET id=excluded.id, "
                    "document_id=excluded.document_id, document_name=excluded.document_name, "
                    "chunk_index=excluded.chunk_index, text=excluded.text, "
                    "terms=excluded.terms, metadata=excluded.metadata, vector=excluded.vector",
                    params,
                )
                _set_info(coll.db, "next_fid", str(next_fid))
                generation = self._bump(coll)
            replaced = np.array([existing[r.id] for r in rows if r.id in existing], np.int64)
            self._apply(coll, generation, remove=replaced, add=(np.array(fids, np.int64), vectors))
        return len(rows)

    def delete_stale_chunks(self, name: str, document_ids: list[str], keep_ids: list[str]) -> int:
        coll = self._open(name)
        keep = set(keep_ids)
        with self._locked(coll), self._errors("deleting chunks", name):
            stale = [fid for fid, cid in self._chunks_of(coll, document_ids) if cid not in keep]
            self._delete_fids(coll, stale)
        return len(stale)

    def delete_documents(self, name: str, document_ids: list[str]) -> int:
        coll = self._open(name)
        with self._locked(coll), self._errors("deleting documents", name):
            fids = [fid for fid, _ in self._chunks_of(coll, document_ids)]
            self._delete_fids(coll, fids)
        return len(fids)

    def _delete_fids(self, coll: _Collection, fids: list[int]) -> None:
        if not fids:
            return
        if self._index_type != "hnsw":  # HNSW is rebuilt after a delete anyway
            self._ensure_index(coll, build=True)
        with _transaction(coll.db):
            for batch in _batches(fids):
                coll.db.execute(
                    f"DELETE FROM chunks WHERE fid IN ({_marks(len(batch))})", list(batch)
                )
            generation = self._bump(coll)
        self._apply(coll, generation, remove=np.array(fids, np.int64), add=None)

    @staticmethod
    def _bump(coll: _Collection) -> int:
        """Advances the write generation inside the caller's transaction."""
        generation = coll.generation + 1
        _set_info(coll.db, "generation", str(generation))
        return generation

    def _apply(
        self,
        coll: _Collection,
        generation: int,
        remove: np.ndarray,
        add: tuple[np.ndarray, np.ndarray] | None,
    ) -> None:
        """Brings the in-memory index to a write that SQLite has committed."""
        coll.generation = generation
        coll.gpu_index = None
        index = coll.index
        if index is None:
            return  # rebuilt from the database when a search needs it
        try:
            if self._index_type == "hnsw" and len(remove):
                # HNSW cannot remove vectors: rebuild before the next search.
                coll.index = None
                return
            faiss.omp_set_num_threads(self._build_threads)
            if len(remove):
                index.remove_ids(faiss.IDSelectorBatch(remove))
            if add is not None:
                index.add_with_ids(add[1], add[0])
            coll.index_generation = generation
        except Exception as exc:  # the commit stands; the index is rebuilt from it
            log.warning("updating the FAISS index of '%s' failed (%s); rebuilding", coll.name, exc)
            coll.index = None
            return
        self._maybe_save(coll)

    # -- VectorStore: reading ----------------------------------------------------------

    def list_documents(
        self, name: str, limit: int, offset: int
    ) -> tuple[list[DocumentRecord], int]:
        check_page(limit, offset)
        coll = self._open(name)
        with self._locked(coll), self._errors("listing documents", name):
            total = int(
                coll.db.execute("SELECT COUNT(DISTINCT document_id) FROM chunks").fetchone()[0]
            )
            if limit == 0:
                return [], total
            # The name and metadata are those of the document's first chunk. ORDER BY on
            # TEXT compares UTF-8 bytes, which orders like Python's str comparison.
            page = coll.db.execute(
                "SELECT d.document_id, d.n, "
                "(SELECT document_name FROM chunks c WHERE c.document_id = d.document_id "
                " ORDER BY chunk_index, fid LIMIT 1), "
                "(SELECT metadata FROM chunks c WHERE c.document_id = d.document_id "
                " ORDER BY chunk_index, fid LIMIT 1) "
                "FROM (SELECT document_id, COUNT(*) AS n FROM chunks GROUP BY document_id "
                "      ORDER BY document_id LIMIT ? OFFSET ?) d ORDER BY d.document_id",
                (limit, offset),
            ).fetchall()
        documents = [
            DocumentRecord(id=doc, name=doc_name or "", num_chunks=int(n), metadata=json.loads(md))
            for doc, n, doc_name, md in page
        ]
        return documents, total

    def dense_search(
        self,
        name: str,
        vector: list[float],
        k: int,
        flt: MetadataFilter | None,
        include_vectors: bool = False,
    ) -> list[ScoredChunk]:
        coll = self._open(name)
        validate_top_k(k, MAX_TOP_K)
        query = _unit(check_query_vector(vector, coll.record.dimension, name)).reshape(1, -1)
        with self._locked(coll), self._errors("searching by vector", name):
            index = self._ensure_index(coll, build=True)
            total = int(index.ntotal)
            if total == 0:
                return []
            cache: dict[int, bool] = {}
            depth = min(total, k if flt is None else k * 4)
            while True:
                exhaustive = depth >= total
                scores, fids = self._search_index(coll, query, depth, exhaustive)
                hits = self._take(coll, fids, scores, k, flt, include_vectors, cache)
                # Fewer than k: the filter rejected candidates, or HNSW/IVF found fewer
                # than asked; either way, look deeper until everything was considered.
                if len(hits) >= k or exhaustive:
                    return hits
                depth = min(total, depth * 4)

    def sparse_search(
        self,
        name: str,
        text: str,
        k: int,
        flt: MetadataFilter | None,
        include_vectors: bool = False,
    ) -> list[ScoredChunk]:
        coll = self._open(name)
        validate_top_k(k, MAX_TOP_K)
        terms = self._analyzer.terms(text)
        if not terms:
            return []  # only stop words: nothing for BM25 to match
        with self._locked(coll), self._errors("searching by text", name):
            bm25 = self._ensure_bm25(coll)
            if bm25.model is None:
                return []
            vocab: dict[str, int] = bm25.model.vocab_dict
            # A repeated query term counts once per repetition, as in Milvus.
            token_ids = [vocab[t] for t in terms if t in vocab]
            if not token_ids:
                return []
            scores = np.asarray(bm25.model.get_scores_from_ids(token_ids), dtype=np.float64)
            candidates = np.flatnonzero(scores > 0)  # only chunks sharing a term, as Milvus
            # Best first; equal scores in insertion order, so ties rank deterministically.
            order = candidates[np.lexsort((bm25.fids[candidates], -scores[candidates]))]
            return self._take(
                coll,
                bm25.fids[order],
                scores[order] * (self._k1 + 1.0),
                k,
                flt,
                include_vectors,
                {},
            )

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            collections = list(self._collections.values())
            self._collections.clear()
            for coll in collections:
                with coll.lock:
                    with contextlib.suppress(Exception):  # closing must not mask the shutdown
                        self._maybe_save(coll, force=True)
                    coll.closed = True
                    with contextlib.suppress(Exception):
                        coll.db.close()
                    coll.index = coll.gpu_index = coll.bm25 = None
            self._closed = True
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)  # releases the flock

    # -- the dense index ---------------------------------------------------------------

    def _kind(self) -> str:
        """The index file's tag: type plus the parameters that shape the structure."""
        if self._index_type == "hnsw":
            return f"hnsw{self._hnsw_m}"
        if self._index_type == "ivf":
            return f"ivf{self._ivf_nlist}"
        return "flat"

    def _index_path(self, coll: _Collection, generation: int) -> Path:
        return coll.path / f"index-{self._kind()}-g{generation}.faiss"

    def _ensure_index(self, coll: _Collection, build: bool) -> Any:
        """The index as of the current generation: in memory, else from its file, else (if
        `build`) rebuilt from the stored vectors. Without `build` it may return None."""
        if coll.index is None or coll.index_generation != coll.generation:
            coll.index = None
            coll.gpu_index = None
            self._load_index(coll)
        if build and (coll.index is None or self._wants_training(coll.index)):
            coll.index = self._build_index(coll)
            coll.index_generation = coll.generation
            coll.gpu_index = None
            self.index_builds += 1
            self._maybe_save(coll)
        return coll.index

    def _load_index(self, coll: _Collection) -> None:
        path = self._index_path(coll, coll.generation)
        if not path.is_file():
            return
        try:
            index = _read_index_file(path, coll.generation)
        except (RuntimeError, ValueError, OSError) as exc:
            log.warning("index file %s is unusable (%s); rebuilding the index", path, exc)
            with contextlib.suppress(OSError):
                path.unlink()
            return
        rows = int(coll.db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        if not self._fits(index, coll.record.dimension) or index.ntotal != rows:
            log.warning(
                "index file %s does not match the stored chunks (%d vectors, %d chunks); "
                "rebuilding the index",
                path,
                index.ntotal,
                rows,
            )
            return
        self._configure(index)
        coll.index = index
        coll.index_generation = coll.generation
        coll.saved_generation = coll.generation
        self.index_loads += 1

    def _fits(self, index: Any, dimension: int) -> bool:
        if index.d != dimension or index.metric_type != faiss.METRIC_INNER_PRODUCT:
            return False
        if isinstance(index, faiss.IndexIDMap2):
            inner = faiss.downcast_index(index.index)
            if self._index_type == "hnsw":
                return isinstance(inner, faiss.IndexHNSWFlat)
            return isinstance(inner, faiss.IndexFlat)  # flat, or ivf before training
        return self._index_type == "ivf" and isinstance(index, faiss.IndexIVFFlat)

    def _wants_training(self, index: Any) -> bool:
        """An ivf collection still on its flat fallback that now has enough vectors."""
        return (
            self._index_type == "ivf"
            and isinstance(index, faiss.IndexIDMap2)
            and index.ntotal >= self._ivf_min_train
        )

    def _configure(self, index: Any) -> None:
        if isinstance(index, faiss.IndexIVFFlat):
            index.nprobe = self._ivf_nprobe

    def _build_index(self, coll: _Collection) -> Any:
        faiss.omp_set_num_threads(self._build_threads)
        fids, vectors = self._stored_vectors(coll)
        d = coll.record.dimension
        if self._index_type == "hnsw":
            hnsw = faiss.IndexHNSWFlat(d, self._hnsw_m, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = self._hnsw_ef_construction
            index = faiss.IndexIDMap2(hnsw)
        elif self._index_type == "ivf" and len(fids) >= self._ivf_min_train:
            index = faiss.index_factory(d, f"IVF{self._ivf_nlist},Flat", faiss.METRIC_INNER_PRODUCT)
            index.train(vectors)
            self._configure(index)
        else:
            index = faiss.IndexIDMap2(faiss.IndexFlatIP(d))
        if len(fids):
            index.add_with_ids(vectors, fids)
        return index

    def _stored_vectors(self, coll: _Collection) -> tuple[np.ndarray, np.ndarray]:
        d = coll.record.dimension
        n = int(coll.db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        fids = np.empty(n, dtype=np.int64)
        vectors = np.empty((n, d), dtype=np.float32)
        i = 0
        # Filled row by row: a list of blobs joined at the end would double the peak memory.
        for fid, blob in coll.db.execute("SELECT fid, vector FROM chunks ORDER BY fid"):
            if i == n:
                break
            fids[i] = fid
            vectors[i] = np.frombuffer(blob, dtype="<f4")
            i += 1
        return fids[:i], vectors[:i]

    def _maybe_save(self, coll: _Collection, force: bool = False) -> None:
        """Writes the index file if the in-memory index is current and not yet on disk, and
        (unless forced) the last write of it is save_interval_s old."""
        if coll.index is None or coll.index_generation != coll.generation:
            return
        if coll.saved_generation == coll.generation:
            return
        if not force and time.monotonic() - coll.saved_at < self._save_interval:
            return
        try:
            self._save_index(coll)
        except OSError as exc:  # the database has the data; the file is only a cache
            log.warning("writing the FAISS index of '%s' failed: %s", coll.name, exc)

    def _save_index(self, coll: _Collection) -> None:
        final = self._index_path(coll, coll.generation)
        tmp = coll.path / f".{final.name}.{uuid.uuid4().hex}.tmp"
        try:
            _write_index_file(tmp, coll.index, coll.generation)
            os.replace(tmp, final)  # atomic: readers see the old file or the whole new one
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        _fsync_dir(coll.path)
        coll.saved_generation = coll.generation
        coll.saved_at = time.monotonic()
        for entry in coll.path.iterdir():  # older generations and abandoned temp files
            if entry.name != final.name and (
                _INDEX_FILE_RE.fullmatch(entry.name) or entry.name.endswith(".tmp")
            ):
                with contextlib.suppress(OSError):
                    entry.unlink()

    def _gpu_copy(self, coll: _Collection) -> Any:
        """The GPU search copy of a flat/ivf index, made on demand; None on the CPU."""
        if not self._gpu:
            return None
        if coll.gpu_index is None:
            try:
                coll.gpu_index = faiss.index_cpu_to_all_gpus(coll.index)
            except RuntimeError as exc:
                if self._use_gpu_mode == "always":
                    raise FailedPrecondition(
                        f"copying the index of '{coll.name}' to the GPU failed ({exc}); set "
                        "RAGRAIL_RETRIEVER_FAISS_USE_GPU=auto to fall back to the CPU"
                    ) from exc
                log.warning("copying the FAISS index to the GPU failed (%s); using the CPU", exc)
                self._gpu = False
                self._facts["gpu"] = "no (copy to GPU failed)"
                return None
        return coll.gpu_index

    def _search_index(
        self, coll: _Collection, query: np.ndarray, depth: int, exhaustive: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, fids) of up to `depth` nearest vectors, best first; `exhaustive` asks
        for an exact pass over every vector."""
        index = coll.index
        faiss.omp_set_num_threads(self._search_threads)
        if self._index_type == "hnsw":
            inner = faiss.downcast_index(index.index)
            if exhaustive:
                # Brute force over HNSW's own flat storage: exact, and it returns every
                # vector, which a graph search with ef = n does not guarantee.
                storage = faiss.downcast_index(inner.storage)
                scores, positions = storage.search(query, depth)
                id_map = faiss.vector_to_array(index.id_map)
                keep = positions[0] >= 0
                return scores[0][keep], id_map[positions[0][keep]]
            # efSearch below k would return fewer than k hits. Set under the collection lock,
            # so no other search sees it change.
            inner.hnsw.efSearch = max(depth, self._hnsw_ef_search)
            scores, ids = index.search(query, depth)
        elif isinstance(index, faiss.IndexIVFFlat) and exhaustive:
            params = faiss.SearchParametersIVF(nprobe=index.nlist)  # every list: exact
            scores, ids = index.search(query, depth, params=params)
        else:
            gpu = self._gpu_copy(coll) if depth <= GPU_MAX_K and not exhaustive else None
            scores, ids = (gpu or index).search(query, depth)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep]

    # -- BM25 --------------------------------------------------------------------------

    def _ensure_bm25(self, coll: _Collection) -> _Bm25:
        if coll.bm25 is not None and coll.bm25.generation == coll.generation:
            return coll.bm25
        rows = coll.db.execute("SELECT fid, terms FROM chunks ORDER BY fid").fetchall()
        fids = np.fromiter((fid for fid, _ in rows), dtype=np.int64, count=len(rows))
        corpus = [terms.split() for _, terms in rows]
        model = None
        if any(corpus):  # bm25s cannot index a corpus without a single term
            # float64: scores agree with Milvus's (Python floats) beyond float32's 7 digits.
            model = bm25s.BM25(method="lucene", k1=self._k1, b=self._b, dtype="float64")
            model.index(corpus, show_progress=False)
        coll.bm25 = _Bm25(model=model, fids=fids, generation=coll.generation)
        self.bm25_builds += 1
        return coll.bm25

    # -- rows --------------------------------------------------------------------------

    def _take(
        self,
        coll: _Collection,
        fids: np.ndarray,
        scores: np.ndarray,
        k: int,
        flt: MetadataFilter | None,
        include_vectors: bool,
        cache: dict[int, bool],
    ) -> list[ScoredChunk]:
        """The first k candidates (in the given order) that pass the filter, as hits. The
        filter is decided on rows without text, read in batches only as far as needed and
        remembered in `cache` (fid -> passes) across deeper passes; only the k winners are
        read whole."""
        chosen: list[tuple[int, float]] = []
        if flt is None:
            chosen = [(int(f), float(s)) for f, s in zip(fids[:k], scores[:k], strict=True)]
        else:
            step = max(4 * k, 256)
            for start in range(0, len(fids), step):
                batch = [int(f) for f in fids[start : start + step]]
                missing = [f for f in batch if f not in cache]
                if missing:
                    light = self._rows(coll, missing, include_vectors=False, text=False)
                    for fid in missing:
                        chunk = light.get(fid)
                        cache[fid] = chunk is not None and matches(flt, chunk)
                for offset, fid in enumerate(batch):
                    if cache[fid]:
                        chosen.append((fid, float(scores[start + offset])))
                        if len(chosen) == k:
                            break
                if len(chosen) == k:
                    break
        rows = self._rows(coll, [fid for fid, _ in chosen], include_vectors)
        return [ScoredChunk(rows[fid], score) for fid, score in chosen if fid in rows]

    def _rows(
        self, coll: _Collection, fids: Sequence[int], include_vectors: bool, text: bool = True
    ) -> dict[int, ChunkRecord]:
        columns = (
            "fid, id, document_id, document_name, chunk_index, "
            + ("text" if text else "''")
            + ", metadata"
            + (", vector" if include_vectors else "")
        )
        found: dict[int, ChunkRecord] = {}
        for batch in _batches(fids):
            cursor = coll.db.execute(
                f"SELECT {columns} FROM chunks WHERE fid IN ({_marks(len(batch))})", list(batch)
            )
            for row in cursor:
                vector = np.frombuffer(row[7], dtype="<f4").tolist() if include_vectors else []
                found[int(row[0])] = ChunkRecord(
                    id=row[1],
                    document_id=row[2],
                    text=row[5],
                    vector=vector,
                    metadata=json.loads(row[6]),
                    document_name=row[3],
                    chunk_index=int(row[4]),
                )
        return found

    def _fids_of_ids(self, coll: _Collection, ids: list[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for batch in _batches(ids):
            cursor = coll.db.execute(
                f"SELECT id, fid FROM chunks WHERE id IN ({_marks(len(batch))})", list(batch)
            )
            found.update((cid, int(fid)) for cid, fid in cursor)
        return found

    def _chunks_of(self, coll: _Collection, document_ids: list[str]) -> list[tuple[int, str]]:
        """(fid, chunk id) of every chunk of these documents."""
        found: list[tuple[int, str]] = []
        for batch in _batches(list(dict.fromkeys(document_ids))):
            cursor = coll.db.execute(
                f"SELECT fid, id FROM chunks WHERE document_id IN ({_marks(len(batch))})",
                list(batch),
            )
            found.extend((int(fid), cid) for fid, cid in cursor)
        return found


# -- rows to write -----------------------------------------------------------------------


@dataclass
class _Row:
    id: str
    document_id: str
    document_name: str
    chunk_index: int
    text: str
    terms: str
    metadata: str  # JSON
    vector: np.ndarray  # float32, L2-normalised

    def columns(self) -> tuple[Any, ...]:
        return (
            self.id,
            self.document_id,
            self.document_name,
            self.chunk_index,
            self.text,
            self.terms,
            self.metadata,
            self.vector.astype("<f4").tobytes(),
        )


def _row(chunk: ChunkRecord, dimension: int, name: str, analyzer: LexicalAnalyzer) -> _Row:
    checked = check_chunk(chunk, dimension, name)
    vector = _unit(checked.vector)
    if not vector.any():
        raise InvalidArgument(
            f"{checked.where}: the vector is all zeros, so it has no direction to compare; "
            "check the embedder"
        )
    return _Row(
        id=chunk.id,
        document_id=chunk.document_id,
        document_name=chunk.document_name,
        chunk_index=int(chunk.chunk_index),
        text=chunk.text,
        terms=analyzer.index_text(chunk.text),
        metadata=checked.metadata_json,
        vector=vector,
    )


def _unit(values: list[float]) -> np.ndarray:
    """Unit-length float32 copy of finite values (all zeros stay zeros). Normalised here
    although the embedder already normalises: inner product equals cosine only on unit
    vectors."""
    vector = np.asarray(values, dtype=np.float64)
    norm = float(np.linalg.norm(vector))
    if norm > 0:
        vector = vector / norm
    return vector.astype(np.float32)


# -- SQLite and files --------------------------------------------------------------------

_SCHEMA = (
    "CREATE TABLE info (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # fid is the FAISS id. Vectors are kept here too, so any index type can be rebuilt.
    "CREATE TABLE chunks ("
    " fid INTEGER PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE,"
    " document_id TEXT NOT NULL,"
    " document_name TEXT NOT NULL,"
    " chunk_index INTEGER NOT NULL,"
    " text TEXT NOT NULL,"
    " terms TEXT NOT NULL,"
    " metadata TEXT NOT NULL,"
    " vector BLOB NOT NULL)",
    "CREATE INDEX chunks_by_document ON chunks (document_id, chunk_index)",
)


def _init_db(path: Path, info: dict[str, str]) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        with _transaction(db):
            for statement in _SCHEMA:
                db.execute(statement)
            db.executemany("INSERT INTO info (key, value) VALUES (?, ?)", list(info.items()))
    finally:
        db.close()


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        # SQLite rolls some failures (a full disk) back by itself; a second ROLLBACK would
        # raise and hide the real error.
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _info(db: sqlite3.Connection, key: str) -> str:
    row = db.execute("SELECT value FROM info WHERE key = ?", (key,)).fetchone()
    if row is None:
        raise sqlite3.DatabaseError(f"collection info lacks '{key}' (malformed)")
    return str(row[0])


def _set_info(db: sqlite3.Connection, key: str, value: str) -> None:
    db.execute(
        "INSERT INTO info (key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _batches(items: Iterable[Any]) -> Iterator[list[Any]]:
    listed = list(items)
    for start in range(0, len(listed), SQL_BATCH):
        yield listed[start : start + SQL_BATCH]


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _fsync_dir(path: Path) -> None:
    """Makes a rename in `path` durable (POSIX: the rename lives in the directory)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_index_file(path: Path, index: Any, generation: int) -> None:
    """FAISS's serialisation framed by a header naming the write generation and a SHA-256
    trailer, then fsynced. The frame lets a reader reject a file from another generation
    (say, copied or renamed over) and one damaged in a way faiss would still parse, such as
    flipped bits in the vectors."""
    digest = hashlib.sha256()

    def write(data: bytes) -> None:
        digest.update(data)
        f.write(data)

    with open(path, "wb") as f:
        write(_INDEX_MAGIC + struct.pack("<Q", generation))
        writer = faiss.PyCallbackIOWriter(write)
        faiss.write_index(index, writer)
        del writer
        f.write(digest.digest())
        f.flush()
        os.fsync(f.fileno())


def _read_index_file(path: Path, generation: int) -> Any:
    """The index in a file `_write_index_file` wrote; ValueError if it is not that file
    whole, or is of another generation."""
    digest = hashlib.sha256()

    def read(n: int) -> bytes:
        data = f.read(n)
        digest.update(data)
        return data

    with open(path, "rb") as f:
        header = read(len(_INDEX_MAGIC) + 8)
        if not header.startswith(_INDEX_MAGIC) or len(header) != len(_INDEX_MAGIC) + 8:
            raise ValueError("not a ragrail index file")
        (written,) = struct.unpack("<Q", header[len(_INDEX_MAGIC) :])
        if written != generation:
            raise ValueError(f"it holds generation {written}, the database is at {generation}")
        index = faiss.read_index(faiss.PyCallbackIOReader(read))
        trailer = f.read(digest.digest_size + 1)
    if trailer != digest.digest():
        raise ValueError("its checksum does not match: the file is truncated or damaged")
    return index


def _read_pid(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        return str(int(os.pread(fd, 32, 0).decode().strip()))
    return ""


# -- option checks -----------------------------------------------------------------------


def _check_options(
    directory: str,
    index_type: str,
    use_gpu: str,
    hnsw_m: int,
    hnsw_ef_construction: int,
    hnsw_ef_search: int,
    ivf_nlist: int,
    ivf_nprobe: int,
    ivf_min_train: int | None,
    bm25_k1: float,
    bm25_b: float,
    save_interval_s: float,
    search_threads: int,
) -> None:
    if not directory:
        raise InvalidArgument(
            "the FAISS directory is empty; set RAGRAIL_RETRIEVER_FAISS_DIR to a writable path"
        )
    check_choice("FAISS index type", index_type, INDEX_TYPES)
    if use_gpu not in GPU_MODES:
        raise InvalidArgument(f"use_gpu must be one of {list(GPU_MODES)}, got {use_gpu!r}")
    positive = {
        "hnsw_m": hnsw_m,
        "hnsw_ef_construction": hnsw_ef_construction,
        "hnsw_ef_search": hnsw_ef_search,
        "ivf_nlist": ivf_nlist,
        "ivf_nprobe": ivf_nprobe,
        "search_threads": search_threads,
    }
    for option, value in positive.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgument(f"{option} must be a positive integer, got {value!r}")
    if hnsw_m < 2:
        raise InvalidArgument(f"hnsw_m must be at least 2, got {hnsw_m}")
    if ivf_min_train is not None and ivf_min_train < ivf_nlist:
        raise InvalidArgument(
            f"ivf_min_train ({ivf_min_train}) must be at least ivf_nlist ({ivf_nlist}): "
            "k-means needs a vector per centroid"
        )
    if not (math.isfinite(bm25_k1) and bm25_k1 > 0):
        raise InvalidArgument(f"bm25_k1 must be positive, got {bm25_k1}")
    if not (math.isfinite(bm25_b) and 0 <= bm25_b <= 1):
        raise InvalidArgument(f"bm25_b must be between 0 and 1, got {bm25_b}")
    if not (math.isfinite(save_interval_s) and save_interval_s >= 0):
        raise InvalidArgument(f"save_interval_s must not be negative, got {save_interval_s}")
