"""Training data: each query's relevant passages with the first stage's hard negatives (BM25,
and optionally a dense embedder), as listwise groups or pointwise pairs."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from trainers import data as common


def mine_negatives(
    data: common.Beir, bm25: common.Bm25, qrels: dict[str, dict[str, int]], args: argparse.Namespace
) -> dict[str, list[str]]:
    """For each query, its `--negatives` best BM25 documents and then its `--dense-negatives`
    best documents of the `--dense-model` embedder that BM25 did not already give, none of
    them relevant by the qrels: the first stage's own mistakes."""
    qids = list(qrels)
    queries = {q: data.queries[q] for q in qids}
    deepest = max((len(rel) for rel in qrels.values()), default=0)
    ranked = bm25.search(list(queries.values()), args.negatives + deepest)
    negatives = common.hard_negatives(dict(zip(qids, ranked, strict=True)), qrels, args.negatives)
    if not args.dense_negatives:
        return negatives
    from sentence_transformers import SentenceTransformer

    embedder = SentenceTransformer(
        common.base_model_path(args.dense_model), device=args.device, local_files_only=True
    )
    doc_ids = list(data.corpus)
    vectors = common.encode(
        embedder, [data.corpus[d] for d in doc_ids], args.eval_batch_size, "dense"
    )
    depth = args.negatives + args.dense_negatives + deepest
    dense = common.dense_rankings(embedder, doc_ids, vectors, queries, depth, args.eval_batch_size)
    merged = common.merge_negatives(negatives, common.hard_negatives(dense, qrels, depth))
    n = args.negatives + args.dense_negatives
    return {qid: docs[:n] for qid, docs in merged.items()}


@dataclass
class Group:
    """One relevant passage of a query and that query's hard negatives."""

    query: str
    positive: str
    negatives: list[str]


def training_groups(
    data: common.Beir, qrels: dict[str, dict[str, int]], negatives: dict[str, list[str]]
) -> list[Group]:
    groups: list[Group] = []
    for qid, relevant in qrels.items():
        negs = [data.corpus[d] for d in negatives.get(qid, [])]
        groups += [Group(data.queries[qid], data.corpus[d], negs) for d in relevant]
    return groups


def training_pairs(groups: list[Group]) -> list[tuple[str, str, float]]:
    """The groups as labelled pairs for the pointwise loss; a query's negatives are paired once
    however many relevant passages it has."""
    pairs: list[tuple[str, str, float]] = []
    seen: set[tuple[str, str]] = set()
    for g in groups:
        pairs.append((g.query, g.positive, 1.0))
        for neg in g.negatives:
            if (g.query, neg) not in seen:
                seen.add((g.query, neg))
                pairs.append((g.query, neg, 0.0))
    return pairs
