"""The FAISS backend's options: index types, GPU modes and the checks on every option."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from services.retriever.backends.validation import check_choice
from shared.errors import InvalidArgument

IndexType = Literal["flat", "hnsw", "ivf"]
GpuMode = Literal["auto", "never", "always"]
INDEX_TYPES: tuple[str, ...] = ("flat", "hnsw", "ivf")
GPU_MODES: tuple[str, ...] = ("auto", "never", "always")

# faiss's k-means warns below 39 training points per centroid.
IVF_POINTS_PER_CENTROID = 39


@dataclass(frozen=True)
class IndexOptions:
    """How every collection's dense index is built and searched."""

    index_type: IndexType
    hnsw_m: int
    hnsw_ef_construction: int
    hnsw_ef_search: int
    ivf_nlist: int
    ivf_nprobe: int  # at most ivf_nlist
    ivf_min_train: int  # vectors a collection needs before its ivf index is trained
    search_threads: int  # OpenMP threads per search
    save_interval_s: float  # least time between two writes of a collection's index file

    @property
    def kind(self) -> str:
        """The index file's tag: type plus the parameters that shape the structure."""
        if self.index_type == "hnsw":
            return f"hnsw{self.hnsw_m}"
        if self.index_type == "ivf":
            return f"ivf{self.ivf_nlist}"
        return "flat"


def index_options(
    directory: str,
    index_type: IndexType,
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
) -> IndexOptions:
    """Checks the store's options (InvalidArgument names the first one wrong); returns those
    of its dense indexes."""
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
    min_train = IVF_POINTS_PER_CENTROID * ivf_nlist if ivf_min_train is None else ivf_min_train
    return IndexOptions(
        index_type, hnsw_m, hnsw_ef_construction, hnsw_ef_search, ivf_nlist,
        min(ivf_nprobe, ivf_nlist), min_train, search_threads, float(save_interval_s),
    )  # fmt: skip
