"""The embedder's quantizations beyond one dynamic variant: static QDQ calibrated on texts
(--mode static), and every dynamic variant measured to keep the best (--variant auto)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from shared.models import quantize as qtools
from shared.models.encoder import OnnxEncoder
from shared.models.quantize import FP32_FILE, INT8_FILE, VARIANTS
from trainers.quantize.embedder_quality import Embed, cosine_stats, one_by_one
from trainers.quantize.texts import SHORT_TEXTS


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
