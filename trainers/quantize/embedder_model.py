"""The embedder recipe's model: a sentence-transformers directory checked for what the onnx
backend runs, and its transformer exported to ONNX."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.models import quantize as qtools
from shared.models.quantize import FP32_FILE, ONNX_OPSET

ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
ONNX_OUTPUT = "last_hidden_state"
SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")


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
