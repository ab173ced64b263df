"""A collection's dense FAISS index: built from the table, loaded from and saved to its index
file, kept current by writes, searched.

Every index type is inner product on L2-normalised vectors, i.e. cosine similarity:

- `flat`: IndexIDMap2(IndexFlatIP), exact. Deletes and replacements are applied in place.
- `hnsw`: IndexIDMap2(IndexHNSWFlat). HNSW cannot remove vectors, so a delete or a
  replacement drops the index and it is rebuilt from the stored vectors before the next
  search; writes never rebuild it themselves.
- `ivf`: IndexIVFFlat, trained once the collection holds `ivf_min_train` vectors; exact flat
  below that. Centroids are not retrained as the collection grows; a rebuild retrains them.

Index files are written at most every `save_interval_s` after writes, and on close: a full
file per batch would make a long ingest quadratic in its size.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from services.retriever.backends.faiss.collection import OpenCollection
from services.retriever.backends.faiss.gpu import GPU_MAX_K, GpuCopies
from services.retriever.backends.faiss.index_file import index_path, read_index_file, save_index
from services.retriever.backends.faiss.options import IndexOptions

log = logging.getLogger(__name__)


class DenseIndexes:
    """The dense indexes of every collection of one store. The caller holds the collection's
    lock around every call."""

    def __init__(self, options: IndexOptions, gpu: GpuCopies) -> None:
        self.options = options
        self.gpu = gpu
        # OpenMP threads: options.search_threads (default 1) per search, all per build. One
        # query gains nothing from a team of threads and pays for waking it: on this
        # project's shared 2-core machine a flat search of 10k vectors took 20-30 ms with 2
        # threads and 0.6 ms with 1. Builds (HNSW inserts, IVF training) do use the threads.
        # libgomp keeps the setting per calling thread, so each search or build sets it for
        # the worker thread it runs on.
        self._build_threads = max(1, faiss.omp_get_max_threads())
        # How often an index came from a file and how often it was rebuilt; tests read them.
        self.loads = 0
        self.builds = 0

    def ensure(self, coll: OpenCollection, build: bool) -> Any:
        """The index as of the current generation: in memory, else from its file, else (if
        `build`) rebuilt from the stored vectors. Without `build` it may return None."""
        if coll.index is None or coll.index_generation != coll.generation:
            coll.index = None
            coll.gpu_index = None
            self._load(coll)
        if build and (coll.index is None or self._wants_training(coll.index)):
            coll.index = self._build(coll)
            coll.index_generation = coll.generation
            coll.gpu_index = None
            self.builds += 1
            self.maybe_save(coll)
        return coll.index

    def apply(
        self,
        coll: OpenCollection,
        generation: int,
        remove: np.ndarray,
        add: tuple[np.ndarray, np.ndarray] | None,
    ) -> None:
        """Brings the in-memory index to a write that the table has committed."""
        coll.generation = generation
        coll.gpu_index = None
        index = coll.index
        if index is None:
            return  # rebuilt from the database when a search needs it
        try:
            if self.options.index_type == "hnsw" and len(remove):
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
        self.maybe_save(coll)

    def maybe_save(self, coll: OpenCollection, force: bool = False) -> None:
        """Writes the index file if the in-memory index is current and not yet on disk, and
        (unless forced) the last write of it is save_interval_s old."""
        if coll.index is None or coll.index_generation != coll.generation:
            return
        if coll.saved_generation == coll.generation:
            return
        if not force and time.monotonic() - coll.saved_at < self.options.save_interval_s:
            return
        try:
            save_index(self._path(coll), coll.index, coll.generation)
        except OSError as exc:  # the database has the data; the file is only a cache
            log.warning("writing the FAISS index of '%s' failed: %s", coll.name, exc)
            return
        coll.saved_generation = coll.generation
        coll.saved_at = time.monotonic()

    def search(
        self, coll: OpenCollection, query: np.ndarray, depth: int, exhaustive: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, fids) of up to `depth` nearest vectors, best first; `exhaustive` asks
        for an exact pass over every vector."""
        index = coll.index
        faiss.omp_set_num_threads(self.options.search_threads)
        if self.options.index_type == "hnsw":
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
            inner.hnsw.efSearch = max(depth, self.options.hnsw_ef_search)
            scores, ids = index.search(query, depth)
        elif isinstance(index, faiss.IndexIVFFlat) and exhaustive:
            params = faiss.SearchParametersIVF(nprobe=index.nlist)  # every list: exact
            scores, ids = index.search(query, depth, params=params)
        else:
            gpu = self._gpu_copy(coll) if depth <= GPU_MAX_K and not exhaustive else None
            scores, ids = (gpu or index).search(query, depth)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep]

    # -- building and loading ------------------------------------------------------------

    def _path(self, coll: OpenCollection) -> Path:
        return index_path(coll.path, self.options.kind, coll.generation)

    def _load(self, coll: OpenCollection) -> None:
        path = self._path(coll)
        if not path.is_file():
            return
        try:
            index = read_index_file(path, coll.generation)
        except (RuntimeError, ValueError, OSError) as exc:
            log.warning("index file %s is unusable (%s); rebuilding the index", path, exc)
            with contextlib.suppress(OSError):
                path.unlink()
            return
        rows = coll.table.size()
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
        self.loads += 1

    def _fits(self, index: Any, dimension: int) -> bool:
        if index.d != dimension or index.metric_type != faiss.METRIC_INNER_PRODUCT:
            return False
        if isinstance(index, faiss.IndexIDMap2):
            inner = faiss.downcast_index(index.index)
            if self.options.index_type == "hnsw":
                return isinstance(inner, faiss.IndexHNSWFlat)
            return isinstance(inner, faiss.IndexFlat)  # flat, or ivf before training
        return self.options.index_type == "ivf" and isinstance(index, faiss.IndexIVFFlat)

    def _wants_training(self, index: Any) -> bool:
        """An ivf collection still on its flat fallback that now has enough vectors."""
        return (
            self.options.index_type == "ivf"
            and isinstance(index, faiss.IndexIDMap2)
            and index.ntotal >= self.options.ivf_min_train
        )

    def _configure(self, index: Any) -> None:
        if isinstance(index, faiss.IndexIVFFlat):
            index.nprobe = self.options.ivf_nprobe

    def _build(self, coll: OpenCollection) -> Any:
        faiss.omp_set_num_threads(self._build_threads)
        fids, vectors = coll.table.vectors(coll.record.dimension)
        d = coll.record.dimension
        o = self.options
        if o.index_type == "hnsw":
            hnsw = faiss.IndexHNSWFlat(d, o.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = o.hnsw_ef_construction
            index = faiss.IndexIDMap2(hnsw)
        elif o.index_type == "ivf" and len(fids) >= o.ivf_min_train:
            index = faiss.index_factory(d, f"IVF{o.ivf_nlist},Flat", faiss.METRIC_INNER_PRODUCT)
            index.train(vectors)
            self._configure(index)
        else:
            index = faiss.IndexIDMap2(faiss.IndexFlatIP(d))
        if len(fids):
            index.add_with_ids(vectors, fids)
        return index

    def _gpu_copy(self, coll: OpenCollection) -> Any:
        """The GPU search copy of a flat/ivf index, made on demand; None on the CPU."""
        if not self.gpu.enabled:
            return None
        if coll.gpu_index is None:
            coll.gpu_index = self.gpu.copy(coll.index, coll.name)
        return coll.gpu_index
