"""nDCG@10 of a cross-encoder reranking each evaluation query's BM25 candidates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers import data as common


@dataclass
class EvalSet:
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    candidates: dict[str, list[str]]  # BM25 top-depth per query

    def bm25_ndcg(self) -> float:
        return common.mean(common.ndcg_at(self.candidates[q], self.qrels[q]) for q in self.qrels)


def rerank_ndcg(
    model: Any, data: common.Beir, evalset: EvalSet, batch_size: int, desc: str
) -> float:
    """nDCG@10 of the model reranking each query's BM25 candidates."""
    qids = list(evalset.qrels)
    pairs = [(evalset.queries[q], data.corpus[d]) for q in qids for d in evalset.candidates[q]]
    if not pairs:
        return 0.0
    print(f"{desc}: scoring {len(pairs)} pairs of {len(qids)} queries", flush=True)
    scores = model.predict(pairs, batch_size=batch_size, show_progress_bar=True)
    ndcgs, start = [], 0
    for qid in qids:
        docs = evalset.candidates[qid]
        block = np.asarray(scores[start : start + len(docs)])
        start += len(docs)
        order = np.argsort(-block, kind="stable")
        ndcgs.append(common.ndcg_at([docs[i] for i in order], evalset.qrels[qid]))
    return common.mean(ndcgs)
