"""nDCG@10 of reranking each evaluation query's BM25 candidates: the one measure the trainer
and the quantizer (trainers/quantize/reranker.py) report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers import data as common


@dataclass
class EvalSet:
    """Evaluation queries, each with its BM25 candidates in BM25's order."""

    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    candidates: dict[str, list[str]]  # BM25 top-depth per query

    @classmethod
    def of_bm25(
        cls, data: common.Beir, bm25: common.Bm25, qrels: dict[str, dict[str, int]], depth: int
    ) -> EvalSet:
        """The queries of `qrels` with their `depth` best BM25 documents."""
        ids = list(qrels)
        ranked = bm25.search([data.queries[q] for q in ids], depth)
        return cls({q: data.queries[q] for q in ids}, qrels, dict(zip(ids, ranked, strict=True)))

    def pairs(self, corpus: dict[str, str]) -> list[tuple[str, str]]:
        """(query, passage) of every candidate, query by query: the order `ndcg` reads."""
        return [(self.queries[q], corpus[d]) for q in self.qrels for d in self.candidates[q]]

    def ndcg(self, scores: Any = None) -> float:
        """nDCG@10 of each query's candidates ordered by `scores` (one per pair, in `pairs`
        order), or as BM25 ranked them when None."""
        ndcgs, start = [], 0
        for qid, relevant in self.qrels.items():
            docs = self.candidates[qid]
            if scores is None:
                ranked = docs
            else:
                block = np.asarray(scores[start : start + len(docs)])
                ranked = [docs[i] for i in np.argsort(-block, kind="stable")]
            start += len(docs)
            ndcgs.append(common.ndcg_at(ranked, relevant))
        return common.mean(ndcgs)

    def bm25_ndcg(self) -> float:
        return self.ndcg(None)


def rerank_ndcg(
    model: Any, data: common.Beir, evalset: EvalSet, batch_size: int, desc: str
) -> float:
    """nDCG@10 of the model reranking each query's BM25 candidates."""
    pairs = evalset.pairs(data.corpus)
    if not pairs:
        return 0.0
    print(f"{desc}: scoring {len(pairs)} pairs of {len(evalset.qrels)} queries", flush=True)
    return evalset.ndcg(model.predict(pairs, batch_size=batch_size, show_progress_bar=True))
