"""How close the embedder's INT8 vectors stay to PyTorch FP32's: cosine statistics, and
nDCG@10 of dense retrieval on a BEIR directory."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from shared.models import quantize as qtools
from trainers.data import Beir, ndcg_at
from trainers.quantize.texts import ONE_WORD_TEXTS

Embed = Callable[[list[str]], np.ndarray]


def one_by_one(embed: Embed) -> np.ndarray:
    """ONE_WORD_TEXTS, each in a batch of its own (a lone query)."""
    return np.vstack([embed([text]) for text in ONE_WORD_TEXTS])


def cosine_stats(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    cos = (a * b).sum(axis=1)
    return {
        "min": round(float(cos.min()), 6),
        "mean": round(float(cos.mean()), 6),
        "texts": len(cos),
    }


def load_beir(
    root: Path, split: str, max_queries: int, max_docs: int
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """(documents, queries, qrels) of a BEIR directory: the split's first `max_queries` queries
    with a relevant document, every document relevant to them, and more documents in file
    order up to `max_docs` (0: the whole corpus)."""
    data = Beir.load(root)
    qrels = data.qrels(split, max_queries)
    if not qrels:
        raise SystemExit(f"{root}: split '{split}' has no query with a relevant document")
    keep = {d for rel in qrels.values() for d in rel}
    if max_docs:
        for did in data.corpus:
            if len(keep) >= max_docs:
                break
            keep.add(did)
    docs = {d: t for d, t in data.corpus.items() if d in keep} if max_docs else data.corpus
    return docs, {q: data.queries[q] for q in qrels}, qrels


def retrieval_ndcg(
    engines: dict[str, Embed], root: Path, args: argparse.Namespace
) -> dict[str, Any]:
    docs, queries, qrels = load_beir(root, args.eval_split, args.eval_queries, args.eval_docs)
    doc_ids, doc_texts = list(docs), list(docs.values())
    qids, query_texts = list(queries), list(queries.values())
    print(
        f"nDCG@10 on {root} split {args.eval_split}: {len(qids)} queries, {len(doc_ids)} documents",
        flush=True,
    )
    result: dict[str, Any] = {
        "data": str(root),
        "split": args.eval_split,
        "queries": len(qids),
        "documents": len(doc_ids),
    }
    for name, embed in engines.items():
        d, _ = qtools.run_batches(
            embed, doc_texts, qtools.length_batches(doc_texts, args.batch_size), name
        )
        q, _ = qtools.run_batches(
            embed, query_texts, qtools.length_batches(query_texts, 64), f"{name} queries"
        )
        scores = q @ d.T
        ndcgs = []
        for row, qid in enumerate(qids):
            top = np.argsort(-scores[row], kind="stable")[:10]
            ndcgs.append(ndcg_at([doc_ids[i] for i in top], qrels[qid]))
        result[name] = round(float(np.mean(ndcgs)), 6)
    return result
