"""Quantizes a cross-encoder reranker to INT8 with onnxruntime and measures what it costs.

    python -m trainers.quantize reranker --model models/reranker/minilm-scifact/<version> \\
        --data ../shared/data/scifact           # -> models/reranker/minilm-scifact-int8/<version>/
    python -m trainers.quantize reranker --model DIR --out /tmp/q --bench-pairs 16 --repeats 1

The model is a directory written by `python -m trainers.reranker` (a sentence-transformers
CrossEncoder with one output logit). Its `model.onnx` is copied when it has one (`--export`
exports anyway), else the model is exported with `trainers.reranker`'s own export (opset 17,
inputs input_ids, attention_mask and token_type_ids, output logits (batch, 1)). That FP32
file is quantized as the embedder's is (trainers/quantize/embedder.py, same helpers):
`onnxruntime.quantization.quantize_dynamic`, MatMul weights to signed INT8 with one scale
per output channel (`--variant`), activations quantized per batch at run time; the
classification head (a Gemm) and the activation-by-activation attention MatMuls stay FP32.

The output directory is a complete model directory for the reranker service: model.onnx,
model_int8.onnx, the tokenizer and configuration, and the PyTorch weights too, so that the
sentence-transformers backend (and the service's newest-model lookup, which goes by
config.json) also loads it.

Then it measures on (query, passage) pairs: with `--data` (a BEIR directory) the BM25 top
`--eval-depth` of the first `--eval-max-queries` queries of `--eval-split`, else built-in
pairs (queries about samples/corpus against its passages). `--bench-pairs` of them, shuffled
with `--seed`, are timed with PyTorch FP32 (CrossEncoder.predict), ONNX FP32 and ONNX INT8
(the service's own OnnxCrossEncoder), same batch size, threads and truncation, `--repeats`
times interleaved (median reported); the INT8 and ONNX FP32 scores are compared with
PyTorch's (max and mean absolute difference of the activated scores). With `--data` it also
reports nDCG@10 of reranking every query's BM25 candidates with PyTorch FP32 and ONNX INT8.
It writes metrics.json, manifest.json and a README.md model card; the command fails when the
INT8 scores differ from PyTorch's by more than `--max-score-diff`. The same model, data and
arguments give the same ONNX bytes and the same pairs.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from shared.models import quantize as qtools
from shared.models.cross_encoder import OnnxCrossEncoder, TorchCrossEncoder
from shared.models.quantize import FP32_FILE, INT8_FILE
from trainers.data import Beir, add_output_arguments, output_dir
from trainers.quantize.common import add_variant_argument, exit_status, quantize_parser
from trainers.quantize.reranker_card import model_card
from trainers.quantize.reranker_model import fp32_onnx, load_cross_encoder, source_manifest
from trainers.quantize.reranker_pairs import bench_pairs, load_eval, pair_length, sample_pairs
from trainers.quantize.reranker_quality import Score, difference, ranking_ndcg
from trainers.reranker.evaluation import EvalSet

# PyTorch weights, copied so the output also serves the sentence-transformers backend.
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# A copied model.onnx must score like the PyTorch weights beside it (a fresh export differs
# by about 1e-7); more means it was exported from other weights.
FP32_TOLERANCE = 1e-3


def default_out(args: argparse.Namespace) -> Path:
    """models/reranker/<trained name>-int8/<trained version>/: the trainer's layout, found by
    the service's newest-model lookup."""
    src = Path(args.model).resolve()
    return output_dir("reranker", args.name or f"{src.parent.name}-int8", args.version or src.name)


def quantize(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """Runs the whole recipe; returns the output directory and its metrics."""
    started = time.perf_counter()
    src = Path(args.model)
    if not src.is_dir():
        raise SystemExit(f"model directory {src} does not exist")
    out: Path = args.out or default_out(args)
    if out.resolve() == src.resolve():
        raise SystemExit("--out must be another directory than --model (the card and manifest)")
    if (out / INT8_FILE).exists() and not args.overwrite:
        raise SystemExit(f"{out} already holds a model; pass --overwrite or another --out")
    threads = qtools.prepare(args)

    evaluation: tuple[Beir, EvalSet] | None = None  # the data and its queries' candidates
    if args.data:
        evaluation = load_eval(args.data, args.eval_split, args.eval_max_queries, args.eval_depth)
        data, evalset = evaluation
        pool = evalset.pairs(data.corpus)
        source = (
            f"BM25 top {args.eval_depth} of {len(evalset.qrels)} queries of `{args.data}` "
            f"split `{args.eval_split}`"
        )
    else:
        pool, source = sample_pairs()
    if not pool:
        raise SystemExit(f"no (query, passage) pairs to measure on ({source})")
    pairs = bench_pairs(pool, args.bench_pairs, args.seed)

    model = load_cross_encoder(src, args.max_length)
    max_length = int(model.max_seq_length)
    out.mkdir(parents=True, exist_ok=True)
    onnx_info = fp32_onnx(model, src, out, args.export)
    # The PyTorch weights too, so the output also serves the sentence-transformers backend.
    copied = qtools.copy_model_files(src, out, WEIGHT_FILES)
    print(f"{onnx_info['source']}: {out / FP32_FILE}; copied {copied}", flush=True)
    quant = qtools.quantize_dynamic_variant(out / FP32_FILE, out / INT8_FILE, args.variant)
    print(f"quantized {out / INT8_FILE}: {quant}", flush=True)

    fp32, int8 = (
        OnnxCrossEncoder(
            out, file, threads=threads, batch_size=args.batch_size, max_length=max_length
        )
        for file in (FP32_FILE, INT8_FILE)
    )
    engines: dict[str, Score] = {
        "torch_fp32": TorchCrossEncoder(model, batch_size=args.batch_size).predict,
        "onnx_fp32": fp32.predict,
        "onnx_int8": int8.predict,
    }
    print(
        f"timing {len(pairs)} pairs x {args.repeats} run(s), batch {args.batch_size}, "
        f"{threads} thread(s), max {max_length} tokens",
        flush=True,
    )
    scores, speed = qtools.measure(
        engines, pairs, args.batch_size, args.repeats, length=pair_length, unit="pair"
    )
    distinct = min(len(pairs), len(pool))  # the rest repeat these
    diff = {
        name: difference(scores[name][:distinct], scores["torch_fp32"][:distinct])
        for name in ("onnx_fp32", "onnx_int8")
    }
    if diff["onnx_fp32"]["max_abs"] > FP32_TOLERANCE:
        raise SystemExit(
            f"{out / FP32_FILE} scores differ from the PyTorch weights by "
            f"{diff['onnx_fp32']['max_abs']} (more than {FP32_TOLERANCE}): the model.onnx of "
            f"{src} was exported from other weights; pass --export --overwrite to export it again"
        )
    encoded = fp32.tokenizer(
        [p[0] for p in pairs[:distinct]],
        [p[1] for p in pairs[:distinct]],
        truncation="longest_first",
        max_length=max_length,
    )
    metrics: dict[str, Any] = {
        "pairs": {
            "source": source,
            "count": len(pairs),
            "distinct": distinct,
            "mean_tokens": round(float(np.mean([len(i) for i in encoded["input_ids"]])), 1),
        },
        "batch_size": args.batch_size,
        "threads": threads,
        "max_length": max_length,
        "cpu": qtools.cpu_name(),
        # measure() names its unit texts; here each input is a (query, passage) pair.
        **qtools.speed_metrics(speed, "pair"),
        "score_diff_vs_torch_fp32": diff,
        "size_mb": qtools.size_mb(out),
    }
    if evaluation is not None:
        metrics["eval_split"] = args.eval_split
        metrics["ndcg@10"] = ranking_ndcg(
            {"torch_fp32": engines["torch_fp32"], "onnx_int8": int8.predict},
            *evaluation,
            args.batch_size,
            args.eval_depth,
        )

    manifest = qtools.write_quantized(
        out,
        args,
        started,
        model_card,
        role="reranker",
        source=source_manifest(src),
        method=(
            "onnxruntime dynamic quantization of the FP32 ONNX export "
            f"({quant['variant']}), INT8 weights"
        ),
        format=["onnx", "sentence-transformers"],
        onnx=onnx_info,
        quantization=quant,
        metrics=metrics,
    )
    print(
        f"{qtools.speed_summary(metrics, 'pair')}; INT8 score difference max "
        f"{diff['onnx_int8']['max_abs']}, mean {diff['onnx_int8']['mean_abs']}",
        flush=True,
    )
    if evaluation is not None:
        n = metrics["ndcg@10"]
        print(
            f"nDCG@10: BM25 {n['bm25']:.4f}, torch FP32 {n['torch_fp32']:.4f}, ONNX INT8 "
            f"{n['onnx_int8']:.4f} ({n['difference']:+.4f})",
            flush=True,
        )
    print(f"saved {out} in {manifest['seconds']} s", flush=True)
    return out, metrics


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = quantize_parser(
        "reranker",
        "Quantize a cross-encoder reranker (trainers.reranker output) to INT8 with onnxruntime, "
        "compare its scores and nDCG@10 with PyTorch FP32 and measure pairs/s.",
    )
    parser.add_argument(
        "--model", required=True, help="Cross-encoder directory written by trainers.reranker."
    )
    add_output_arguments(
        parser,
        "models/reranker/<model's name>-int8/<its version>/",
        "<model's name>-int8",
        "the model's",
    )
    qtools.add_timing_arguments(parser)
    parser.add_argument(
        "--export", action="store_true", help="Export model.onnx even when the model has one."
    )
    add_variant_argument(parser)
    parser.add_argument(
        "--data",
        type=Path,
        help="BEIR directory: measure on the BM25 candidates of its queries and compare "
        "nDCG@10 (default: built-in pairs from samples/corpus, no nDCG).",
    )
    parser.add_argument("--eval-split", default="test", help="qrels split of --data.")
    parser.add_argument("--eval-depth", type=int, default=20, help="BM25 candidates per query.")
    parser.add_argument(
        "--eval-max-queries", type=int, default=50, help="First N queries of the split (0: all)."
    )
    parser.add_argument("--bench-pairs", type=int, default=256, help="How many pairs to time.")
    parser.add_argument(
        "--max-length", type=int, default=0, help="Tokens per pair; 0: the model's own."
    )
    parser.add_argument(
        "--max-score-diff",
        type=float,
        default=0.1,
        help="Most absolute difference of an INT8 score (after the activation, 0 to 1 for a "
        "sigmoid) from PyTorch FP32's on the timed pairs; above it the command fails. A guard "
        "against a broken quantization: nDCG@10 (--data) measures the ranking (default: "
        "%(default)s).",
    )
    parser.add_argument("--seed", type=int, default=42, help="Orders the timed pairs.")
    args = parser.parse_args(argv)
    qtools.check_arguments(
        parser,
        args,
        ("eval_depth", "bench_pairs", "repeats", "batch_size"),
        ("eval_max_queries", "threads", "max_length", "max_score_diff"),
    )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _, metrics = quantize(args)
    worst = metrics["score_diff_vs_torch_fp32"]["onnx_int8"]["max_abs"]
    return exit_status(
        worst > args.max_score_diff,
        f"scores differ from PyTorch FP32 by up to {worst} > --max-score-diff "
        f"{args.max_score_diff}",
    )
