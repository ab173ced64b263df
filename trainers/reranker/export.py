"""Export to ONNX (`model.onnx`) for the reranker service's onnx backend, checked against
PyTorch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from shared.models.quantize import FP32_FILE, ONNX_OPSET, trace_to_onnx

ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def export_onnx(model: Any, out: Path) -> dict:
    """Writes out/model.onnx: the transformer with its classification head, logits (batch, 1)
    from input_ids, attention_mask and (for BERT) token_type_ids, batch and sequence dynamic.
    Checked against PyTorch with onnxruntime when it is installed."""
    import torch

    hf = model.model
    tokenizer = model.tokenizer
    names = [n for n in ONNX_INPUTS if n in tokenizer.model_input_names]
    device = next(hf.parameters()).device
    sample = tokenizer(
        ["what does the reranker score"],
        ["A passage long enough to give the trace a few tokens."],
        return_tensors="pt",
    )
    path = out / FP32_FILE
    wrapper = trace_to_onnx(hf, "logits", names, sample, path, {0: "batch"})
    hf.to(device)
    info: dict[str, Any] = {"file": path.name, "opset": ONNX_OPSET, "inputs": names}
    try:
        import onnxruntime as ort
    except ImportError:
        return info
    check = tokenizer(
        ["what does the reranker score", "a second, longer query about reranking passages"],
        ["A short passage.", "Another passage, somewhat longer, so that one row is padded."],
        padding=True,
        truncation="longest_first",
        max_length=model.max_seq_length,
        return_tensors="pt",
    )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {n: check[n].numpy() for n in names})[0]
    with torch.no_grad():
        want = wrapper(*(check[n] for n in names)).numpy()
    info["max_abs_diff_vs_torch"] = float(np.abs(got - want).max())
    return info
