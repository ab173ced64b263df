"""GPU search copies of flat and ivf indexes.

With use_gpu "auto" and `faiss.get_num_gpus() > 0`, a collection's flat or ivf index is
copied to every GPU with `faiss.index_cpu_to_all_gpus` for searching; the CPU index stays the
master that writes update and that is saved, and the copy is refreshed lazily after writes.
HNSW has no faiss GPU implementation and stays on the CPU. NOT VERIFIED: no GPU and no
faiss-gpu build were available where this was written; only the CPU paths are tested.
"""

from __future__ import annotations

import logging
from typing import Any

import faiss

from services.retriever.backends.faiss.options import GpuMode, IndexType
from shared.errors import FailedPrecondition

log = logging.getLogger(__name__)

# faiss GPU indexes select at most this many results per query (CUDA builds).
GPU_MAX_K = 2_048


class GpuCopies:
    """Whether searches run on GPU copies, and making them."""

    def __init__(self, mode: GpuMode, index_type: IndexType) -> None:
        self.mode = mode
        self.enabled = _resolve(mode, index_type)
        self.status = "yes" if self.enabled else "no"  # for describe()

    def copy(self, index: Any, collection: str) -> Any:
        """A GPU copy of `index`; None on the CPU, or when copying failed in "auto" mode
        (then every later search stays on the CPU)."""
        if not self.enabled:
            return None
        try:
            return faiss.index_cpu_to_all_gpus(index)
        except RuntimeError as exc:
            if self.mode == "always":
                raise FailedPrecondition(
                    f"copying the index of '{collection}' to the GPU failed ({exc}); set "
                    "RAGRAIL_RETRIEVER_FAISS_USE_GPU=auto to fall back to the CPU"
                ) from exc
            log.warning("copying the FAISS index to the GPU failed (%s); using the CPU", exc)
            self.enabled = False
            self.status = "no (copy to GPU failed)"
            return None


def _resolve(mode: GpuMode, index_type: IndexType) -> bool:
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
