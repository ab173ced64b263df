"""The reranker recipe's model: a cross-encoder directory, its FP32 ONNX file (copied or
exported) and what its trainer recorded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from shared.models import quantize as qtools
from shared.models.quantize import FP32_FILE


def load_cross_encoder(path: Path, max_length: int) -> Any:
    from sentence_transformers import CrossEncoder

    if not (path / "config.json").is_file():
        raise SystemExit(
            f"{path} is no cross-encoder directory (no config.json); train one with "
            "`python -m trainers.reranker --data <BEIR directory>`"
        )
    model = CrossEncoder(str(path), device="cpu", local_files_only=True)
    if model.num_labels != 1:
        raise SystemExit(f"{path}: {model.num_labels} labels; a reranker has one (num_labels=1)")
    if max_length:
        model.max_seq_length = max_length
    return model


def fp32_onnx(model: Any, src: Path, out: Path, export: bool) -> dict[str, Any]:
    """out/model.onnx: the model directory's own copy, or a fresh export."""
    if (src / FP32_FILE).is_file() and not export:
        import onnx

        shutil.copyfile(src / FP32_FILE, out / FP32_FILE)
        graph = onnx.load(str(out / FP32_FILE), load_external_data=False).graph
        constants = {i.name for i in graph.initializer}
        return {
            "file": FP32_FILE,
            "source": f"copied from {src / FP32_FILE}",
            "inputs": [i.name for i in graph.input if i.name not in constants],
        }
    from trainers.reranker.export import export_onnx

    # Eager attention, as the embedder recipe exports.
    with qtools.eager_attention(model.model):
        info = export_onnx(model, out)
    return {**info, "source": "exported (trainers.reranker.export.export_onnx, eager attention)"}


def source_manifest(src: Path) -> dict[str, Any]:
    """What the trainer recorded about the model: name, version, base, data."""
    try:
        manifest = json.loads((src / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"path": str(src)}
    keep = ("name", "version", "created_at", "base", "method", "data")
    return {"path": str(src), **{k: manifest[k] for k in keep if k in manifest}}
