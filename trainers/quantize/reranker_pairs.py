"""The (query, passage) pairs the reranker recipe measures on: BM25 candidates of a BEIR
directory's queries (with their nDCG@10), or built-in pairs."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainers.data import Beir, Bm25, mean, ndcg_at
from trainers.quantize.texts import SHORT_TEXTS, sample_passages

Pair = tuple[str, str]


def pair_length(pair: Pair) -> int:
    """Characters of query and passage: the order CrossEncoder.predict and the onnx backend
    sort by, so every engine gets the same batches."""
    return len(pair[0]) + len(pair[1])


def sample_pairs() -> tuple[list[Pair], str]:
    """Every short query of the embedder recipe against every samples/corpus passage: most
    pairs are unrelated, a few relevant, as BM25 candidates are."""
    passages = sample_passages()
    pairs = [(q, p) for q in SHORT_TEXTS for p in passages]
    return pairs, f"{len(SHORT_TEXTS)} built-in queries x {len(passages)} samples/corpus passages"


@dataclass
class EvalData:
    """The BM25 candidates of the evaluation queries, in query order."""

    data: Beir
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    candidates: dict[str, list[str]]

    def pairs(self) -> list[Pair]:
        return [
            (self.queries[q], self.data.corpus[d]) for q in self.qrels for d in self.candidates[q]
        ]

    def ndcg(self, scores: np.ndarray | None) -> float:
        """nDCG@10 of each query's candidates ordered by `scores` (pairs() order), or as BM25
        ranked them when None."""
        ndcgs, start = [], 0
        for qid, relevant in self.qrels.items():
            docs = self.candidates[qid]
            if scores is None:
                ranked = docs
            else:
                order = np.argsort(-scores[start : start + len(docs)], kind="stable")
                ranked = [docs[i] for i in order]
            start += len(docs)
            ndcgs.append(ndcg_at(ranked, relevant))
        return mean(ndcgs)


def load_eval(root: Path, split: str, max_queries: int, depth: int) -> EvalData:
    data = Beir.load(root)
    qrels = data.qrels(split, max_queries)
    if not qrels:
        raise SystemExit(f"{root}: split '{split}' has no query with a relevant document")
    queries = {q: data.queries[q] for q in qrels}
    print(
        f"data {root}: {len(data.corpus)} documents, {len(qrels)} queries of split '{split}', "
        f"BM25 top {depth}",
        flush=True,
    )
    ranked = Bm25(data.corpus).search(list(queries.values()), depth)
    return EvalData(data, queries, qrels, dict(zip(qrels, ranked, strict=True)))


def bench_pairs(pool: list[Pair], n: int, seed: int) -> list[Pair]:
    """n pairs of the pool in an order fixed by the seed, so the timed set mixes queries;
    cycling when the pool is smaller (throughput needs n, not variety)."""
    order = list(range(len(pool)))
    random.Random(seed).shuffle(order)
    return [pool[order[i % len(order)]] for i in range(n)]
