"""FaissStore: dense search with FAISS and BM25 with bm25s, in this process, on local files.

How it keeps data safe, which index types it offers and what they cost are in
services/retriever/README.md ("FAISS backend"); each part has its module here: the SQLite
table that is the source of truth (table.py), index files (index_file.py), the dense index
(dense.py) and its GPU copies (gpu.py), BM25 (bm25.py), and the directory lock (directory.py).

Threads: one RLock per collection serialises its writes, lazy rebuilds and searches (FAISS
indexes must not be searched while being modified); another guards the set of open
collections.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import faiss
import numpy as np

from services.retriever.analysis import LexicalAnalyzer
from services.retriever.backends.base import (
    CollectionRecord,
    ScoredChunk,
    VectorStore,
    collection_exists,
    collection_not_found,
    store_closed,
)
from services.retriever.backends.faiss import bm25
from services.retriever.backends.faiss.collection import OpenCollection
from services.retriever.backends.faiss.dense import DenseIndexes
from services.retriever.backends.faiss.directory import create_folder, lock_directory, remove_folder
from services.retriever.backends.faiss.gpu import GpuCopies
from services.retriever.backends.faiss.options import (
    GpuMode,
    IndexOptions,
    IndexType,
    index_options,
)
from services.retriever.backends.faiss.table import DB_FILE, SCHEMA_VERSION, ChunkTable, row, unit
from services.retriever.backends.validation import is_collection_name, validate_collection_name
from services.retriever.filters import matches
from shared.errors import RagrailError, ResourceExhausted, Unavailable

if TYPE_CHECKING:
    from services.retriever.backends.base import ChunkRecord, DocumentRecord, SearchRequest
    from services.retriever.settings import RetrieverSettings

log = logging.getLogger(__name__)


class FaissStore(VectorStore):
    name = "faiss"
    title = "FAISS"

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
        bm25_k1: float = bm25.BM25_K1,
        bm25_b: float = bm25.BM25_B,
        save_interval_s: float = 10.0,
        search_threads: int = 1,
    ) -> None:
        options = index_options(
            directory, index_type, use_gpu, hnsw_m, hnsw_ef_construction, hnsw_ef_search,
            ivf_nlist, ivf_nprobe, ivf_min_train, bm25_k1, bm25_b, save_interval_s,
            search_threads,
        )  # fmt: skip
        self._dir = Path(directory)
        self._analyzer = analyzer or LexicalAnalyzer()
        self._k1 = float(bm25_k1)
        self._b = float(bm25_b)
        self._use_gpu_mode = use_gpu
        self._dense = DenseIndexes(options, GpuCopies(use_gpu, index_type))
        self._lock = threading.RLock()  # guards _collections and collection create/delete
        self._collections: dict[str, OpenCollection] = {}
        self._closed = False
        self.bm25_builds = 0  # how often BM25 was rebuilt; tests read it
        self._lock_fd = lock_directory(self._dir)
        self._facts = self._describe(options)

    @classmethod
    def from_settings(cls, settings: RetrieverSettings) -> FaissStore:
        analyzer = LexicalAnalyzer(settings.bm25_language)
        return cls(settings.faiss_dir, settings.faiss_index, analyzer, settings.faiss_use_gpu)

    @property
    def index_loads(self) -> int:
        """How often a dense index came from its file."""
        return self._dense.loads

    @property
    def index_builds(self) -> int:
        """How often a dense index was rebuilt from the stored vectors."""
        return self._dense.builds

    def _describe(self, options: IndexOptions) -> dict[str, str]:
        facts = {
            "directory": str(self._dir),
            "index_type": options.index_type,
            "gpu": self._dense.gpu.status,
            "use_gpu": self._use_gpu_mode,
            "metric": "inner product on L2-normalised vectors (cosine)",
            "sparse": f"bm25s lucene, k1={self._k1:g}, b={self._b:g}, scores x(k1+1) as Milvus",
            "analyzer": self._analyzer.signature,
            "faiss": str(faiss.__version__),
            "bm25s": bm25.version(),
        }
        if options.index_type == "hnsw":
            facts["hnsw_m"] = str(options.hnsw_m)
        if options.index_type == "ivf":
            facts["ivf_nlist"] = str(options.ivf_nlist)
            facts["ivf_nprobe"] = str(options.ivf_nprobe)
        return facts

    # -- errors ------------------------------------------------------------------------

    def _domain_error(self, exc: Exception, action: str, name: str | None) -> RagrailError | None:
        """SQLite's and the file system's failures."""
        if not isinstance(exc, (sqlite3.Error, OSError)):
            return None
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

    # -- open collections --------------------------------------------------------------

    def _collection(self, name: str) -> OpenCollection:
        """The open collection (opened on first use); NotFound if there is none."""
        validate_collection_name(name)
        with self._lock:
            if self._closed:
                raise store_closed(self.title)
            coll = self._collections.get(name)
            if coll is not None:
                return coll
            path = self._dir / name
            if not (path / DB_FILE).is_file():
                raise collection_not_found(name)
            with self._errors("opening the collection", name):
                table, stored = ChunkTable.open(name, path)
            coll = OpenCollection(
                name, path, table, stored.record, stored.analyzer, stored.generation
            )
            self._collections[name] = coll
            return coll

    def _open_collection(self, name: str) -> OpenCollection:
        """`_collection` plus the check that BM25 terms are analysed the same way."""
        coll = self._collection(name)
        self.check_analysis(name, coll.analyzer)
        return coll

    def _open(self, name: str) -> int:
        return self._open_collection(name).record.dimension

    @contextlib.contextmanager
    def _locked(self, coll: OpenCollection) -> Iterator[None]:
        with coll.lock:
            if coll.closed:  # deleted (or the store closed) while this call waited
                if self._closed:
                    raise store_closed(self.title)
                raise collection_not_found(coll.name)
            yield

    # -- VectorStore: collections ------------------------------------------------------

    def describe(self) -> dict[str, str]:
        facts = dict(self._facts)
        facts["gpu"] = self._dense.gpu.status  # changes when a copy to the GPU fails
        return facts

    def _create_collection(self, name: str, dimension: int, description: str) -> CollectionRecord:
        created_at = time.time()
        with self._lock, self._errors("creating the collection", name):
            path = self._dir / name
            if name in self._collections or path.exists():
                raise collection_exists(name)
            info = {
                "schema_version": SCHEMA_VERSION,
                "name": name,
                "dimension": str(dimension),
                "description": description,
                "created_at": repr(created_at),
                "analyzer": self._analyzer.signature,
                "generation": "0",
                "next_fid": "1",
            }
            create_folder(path, DB_FILE, info)
        return CollectionRecord(name, dimension, description, created_at)

    def _get_collection(self, name: str) -> CollectionRecord:
        r = self._collection(name).record
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

    def _delete_collection(self, name: str) -> None:
        with self._lock, self._errors("deleting the collection", name):
            path = self._dir / name
            if not (path / DB_FILE).is_file():
                raise collection_not_found(name)
            coll = self._collections.pop(name, None)
            if coll is not None:
                with coll.lock:
                    coll.closed = True
                    coll.table.close()
                    coll.drop_indexes()
            remove_folder(path)

    def count(self, name: str) -> tuple[int, int]:
        coll = self._open_collection(name)
        with self._locked(coll), self._errors("counting chunks", name):
            return coll.table.counts()

    # -- VectorStore: writing ----------------------------------------------------------

    def upsert(self, name: str, chunks: list[ChunkRecord]) -> int:
        coll = self._open_collection(name)
        dimension = coll.record.dimension
        # The last copy of a repeated id wins, as with two upserts in a row.
        rows = list({c.id: row(c, dimension, name, self._analyzer) for c in chunks}.values())
        if not rows:
            return 0
        vectors = np.stack([r.vector for r in rows])
        with self._locked(coll), self._errors("upserting chunks", name):
            existing = coll.table.fids_of_ids([r.id for r in rows])
            # Loaded (flat/ivf: or rebuilt) before the write, so that the write is applied
            # to it in place and a clean shutdown can save it. An HNSW rebuild costs
            # seconds, so writes never trigger one: a replacement discards the index anyway,
            # and a dirty index waits for the next search.
            if self._dense.options.index_type != "hnsw":
                self._dense.ensure(coll, build=True)
            elif not existing:
                self._dense.ensure(coll, build=False)
            next_fid = coll.table.next_fid()
            fids: list[int] = []
            for r in rows:
                if r.id in existing:
                    fids.append(existing[r.id])
                else:
                    fids.append(next_fid)
                    next_fid += 1
            generation = coll.generation + 1
            coll.table.upsert(rows, fids, next_fid, generation)
            replaced = np.array([existing[r.id] for r in rows if r.id in existing], np.int64)
            added = (np.array(fids, np.int64), vectors)
            self._dense.apply(coll, generation, remove=replaced, add=added)
        return len(rows)

    def delete_stale_chunks(self, name: str, document_ids: list[str], keep_ids: list[str]) -> int:
        coll = self._open_collection(name)
        keep = set(keep_ids)
        with self._locked(coll), self._errors("deleting chunks", name):
            stale = [fid for fid, cid in coll.table.chunks_of(document_ids) if cid not in keep]
            self._delete_fids(coll, stale)
        return len(stale)

    def delete_documents(self, name: str, document_ids: list[str]) -> int:
        coll = self._open_collection(name)
        with self._locked(coll), self._errors("deleting documents", name):
            fids = [fid for fid, _ in coll.table.chunks_of(document_ids)]
            self._delete_fids(coll, fids)
        return len(fids)

    def _delete_fids(self, coll: OpenCollection, fids: list[int]) -> None:
        if not fids:
            return
        if self._dense.options.index_type != "hnsw":  # HNSW is rebuilt after a delete anyway
            self._dense.ensure(coll, build=True)
        generation = coll.generation + 1
        coll.table.delete(fids, generation)
        self._dense.apply(coll, generation, remove=np.array(fids, np.int64), add=None)

    # -- VectorStore: reading ----------------------------------------------------------

    def _list_documents(
        self, name: str, limit: int, offset: int
    ) -> tuple[list[DocumentRecord], int]:
        coll = self._open_collection(name)
        with self._locked(coll), self._errors("listing documents", name):
            return coll.table.document_page(limit, offset)

    def _dense_search(self, search: SearchRequest, query: list[float]) -> list[ScoredChunk]:
        """Filtered searches deepen progressively: k*4, k*16, ... candidates, filtered here,
        until k match or every vector was considered; the last pass is exact on every index
        type (see the README on why not an ID selector)."""
        coll = self._open_collection(search.collection)
        vector = unit(query).reshape(1, -1)
        k, flt = search.k, search.flt
        with self._locked(coll), self._errors("searching by vector", coll.name):
            index = self._dense.ensure(coll, build=True)
            total = int(index.ntotal)
            if total == 0:
                return []
            cache: dict[int, ChunkRecord | None] = {}
            depth = min(total, k if flt is None else k * 4)
            while True:
                exhaustive = depth >= total
                scores, fids = self._dense.search(coll, vector, depth, exhaustive)
                hits = self._take(coll, fids, scores, search, cache)
                # Fewer than k: the filter rejected candidates, or HNSW/IVF found fewer
                # than asked; either way, look deeper until everything was considered.
                if len(hits) >= k or exhaustive:
                    return hits
                depth = min(total, depth * 4)

    def _sparse_search(self, search: SearchRequest, terms: list[str]) -> list[ScoredChunk]:
        coll = self._open_collection(search.collection)
        with self._locked(coll), self._errors("searching by text", coll.name):
            fids, scores = bm25.rank(self._ensure_bm25(coll), terms, self._k1)
            if not len(fids):
                return []
            return self._take(coll, fids, scores, search, {})

    def _ensure_bm25(self, coll: OpenCollection) -> bm25.Bm25Index:
        """BM25 as of the current generation, rebuilt from the stored terms after writes."""
        if coll.bm25 is not None and coll.bm25.generation == coll.generation:
            return coll.bm25
        fids, corpus = coll.table.terms()
        coll.bm25 = bm25.build_bm25(fids, corpus, self._k1, self._b, coll.generation)
        self.bm25_builds += 1
        return coll.bm25

    def _take(
        self,
        coll: OpenCollection,
        fids: np.ndarray,
        scores: np.ndarray,
        search: SearchRequest,
        cache: dict[int, ChunkRecord | None],
    ) -> list[ScoredChunk]:
        """The first k candidates (in the given order) that are stored and pass the filter,
        as hits. Rows are read whole, once, k candidates first, then as many as the share
        that passed so far says are still needed (with a margin): a filter that passes most
        chunks costs about what no filter costs (k rows read), where deciding on rows read
        without text first read 4k rows, then the k winners again (+17 ms a search on 560
        chunks). `cache` (fid -> the chunk, None when it fails or is gone) carries the rows
        read across deeper passes."""
        k, flt = search.k, search.flt
        hits: list[ScoredChunk] = []
        start, step = 0, k
        while start < len(fids) and len(hits) < k:
            batch = [int(f) for f in fids[start : start + step]]
            missing = [f for f in batch if f not in cache]
            if missing:
                rows = coll.table.rows(missing, search.include_vectors)
                for fid in missing:
                    chunk = rows.get(fid)
                    cache[fid] = chunk if chunk is not None and matches(flt, chunk) else None
            for offset, fid in enumerate(batch):
                chunk = cache[fid]
                if chunk is not None:
                    hits.append(ScoredChunk(chunk, float(scores[start + offset])))
                    if len(hits) == k:
                        break
            start += len(batch)
            step = _next_batch(k - len(hits), len(hits), start)
        return hits

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            collections = list(self._collections.values())
            self._collections.clear()
            for coll in collections:
                with coll.lock:
                    with contextlib.suppress(Exception):  # closing must not mask the shutdown
                        self._dense.maybe_save(coll, force=True)
                    coll.closed = True
                    with contextlib.suppress(Exception):
                        coll.table.close()
                    coll.drop_indexes()
            self._closed = True
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)  # releases the flock


def _next_batch(wanted: int, passed: int, seen: int) -> int:
    """Candidates to read next for `wanted` more hits, when `passed` of `seen` passed: what
    that share predicts, a quarter more and at least 16; 4x what was seen when none passed."""
    if passed == 0:
        return 4 * seen
    return max(16, math.ceil(wanted * seen / passed * 1.25))
