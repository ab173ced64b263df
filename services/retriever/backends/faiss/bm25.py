"""BM25 for the FAISS backend: bm25s over the analysed terms SQLite stores, ranking as Milvus.

bm25s has no incremental update, so a collection's BM25 index is rebuilt from the stored
terms on the first sparse search after a write. bm25s's "lucene" method is Milvus's formula
up to a factor of (k1 + 1), which `rank` multiplies back in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import bm25s
import numpy as np

# Milvus Lite's defaults (milvus_lite/index/sparse_factory.py), which the Milvus backend does
# not override.
BM25_K1 = 1.5
BM25_B = 0.75


@dataclass
class Bm25Index:
    model: Any  # bm25s.BM25, or None when no chunk has a single term
    fids: np.ndarray  # corpus position -> FAISS id
    generation: int  # the write generation it was built from


def build_bm25(
    fids: np.ndarray, corpus: list[list[str]], k1: float, b: float, generation: int
) -> Bm25Index:
    model = None
    if any(corpus):  # bm25s cannot index a corpus without a single term
        # float64: scores agree with Milvus's (Python floats) beyond float32's 7 digits.
        model = bm25s.BM25(method="lucene", k1=k1, b=b, dtype="float64")
        model.index(corpus, show_progress=False)
    return Bm25Index(model=model, fids=fids, generation=generation)


def rank(bm25: Bm25Index, terms: list[str], k1: float) -> tuple[np.ndarray, np.ndarray]:
    """(fids, scores) of every chunk sharing a term with the query, best first, with
    Milvus's scores."""
    empty = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    if bm25.model is None:
        return empty
    vocab: dict[str, int] = bm25.model.vocab_dict
    # A repeated query term counts once per repetition, as in Milvus.
    token_ids = [vocab[t] for t in terms if t in vocab]
    if not token_ids:
        return empty
    scores = np.asarray(bm25.model.get_scores_from_ids(token_ids), dtype=np.float64)
    candidates = np.flatnonzero(scores > 0)  # only chunks sharing a term, as Milvus
    # Best first; equal scores in insertion order, so ties rank deterministically.
    order = candidates[np.lexsort((bm25.fids[candidates], -scores[candidates]))]
    return bm25.fids[order], scores[order] * (k1 + 1.0)


def version() -> str:
    return str(getattr(bm25s, "__version__", "unknown"))
