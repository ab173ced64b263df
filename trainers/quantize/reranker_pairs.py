"""The (query, passage) pairs the reranker recipe measures on: BM25 candidates of a BEIR
directory's queries (trainers/reranker/evaluation.py's EvalSet), or built-in pairs."""

from __future__ import annotations

import random
from pathlib import Path

from trainers.data import Beir, Bm25
from trainers.quantize.texts import SHORT_TEXTS, sample_passages
from trainers.reranker.evaluation import EvalSet

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


def load_eval(root: Path, split: str, max_queries: int, depth: int) -> tuple[Beir, EvalSet]:
    """A BEIR directory and the BM25 candidates of its split's first `max_queries` queries."""
    data = Beir.load(root)
    qrels = data.qrels(split, max_queries)
    if not qrels:
        raise SystemExit(f"{root}: split '{split}' has no query with a relevant document")
    print(
        f"data {root}: {len(data.corpus)} documents, {len(qrels)} queries of split '{split}', "
        f"BM25 top {depth}",
        flush=True,
    )
    return data, EvalSet.of_bm25(data, Bm25(data.corpus), qrels, depth)


def bench_pairs(pool: list[Pair], n: int, seed: int) -> list[Pair]:
    """n pairs of the pool in an order fixed by the seed, so the timed set mixes queries;
    cycling when the pool is smaller (throughput needs n, not variety)."""
    order = list(range(len(pool)))
    random.Random(seed).shuffle(order)
    return [pool[order[i % len(order)]] for i in range(n)]
