"""The interface every rerank backend implements, and how a backend finds its model directory."""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from services.reranker.settings import RerankerSettings
from shared.errors import FailedPrecondition

log = logging.getLogger(__name__)

# Where `python -m trainers.reranker` saves models by default: <name>/<version>/ below it.
TRAINED_MODELS = Path("models") / "reranker"
TRAIN_HINT = (
    "train one with `python -m trainers.reranker --data <BEIR directory> --export-onnx` "
    "(it saves to models/reranker/<name>/<version>/)"
)
ONNX_HINT = (
    "`python -m trainers.reranker ... --export-onnx` (model.onnx) or "
    "`python -m trainers.quantize reranker --model DIR --out DIR` (model.onnx and model_int8.onnx)"
)


class RerankBackend(ABC):
    name: ClassVar[str]
    model_name: str
    max_length: int
    device: str

    @abstractmethod
    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """float32 array of shape (len(passages),): one relevance score per passage, in input
        order, higher meaning more relevant."""


def newest_trained_model(root: Path, required: str = "config.json") -> Path | None:
    """The most recently trained model directory `root/<name>/<version>/` holding `required`:
    newest by the `created_at` of its manifest.json, else by the file's modification time."""

    def created(path: Path) -> float:
        try:
            manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
            return datetime.fromisoformat(manifest["created_at"]).timestamp()
        except (OSError, ValueError, KeyError, TypeError):
            return (path / required).stat().st_mtime

    candidates = [p.parent for p in root.glob(f"*/*/{required}") if p.is_file()]
    return max(candidates, key=lambda p: (created(p), str(p))) if candidates else None


def resolve_model_dir(settings: RerankerSettings, required: str = "config.json") -> Path:
    """The model directory the settings name, or the newest trained one; it must hold
    `required` (config.json for PyTorch, the `onnx_file` setting for onnxruntime)."""
    backend = f"the {settings.backend} backend"
    if settings.model:
        path = Path(settings.model).expanduser()
        if not path.is_dir():
            raise FailedPrecondition(
                f"reranker model directory {path} does not exist; set RAGRAIL_RERANKER_MODEL "
                f"to a local cross-encoder directory (models are never downloaded), or {TRAIN_HINT}"
            )
        if not (path / required).is_file():
            extra = ""
            if required.endswith(".onnx"):
                present = sorted(p.name for p in path.glob("*.onnx"))
                extra = (
                    f" (ONNX files there: {present or 'none'}); set RAGRAIL_RERANKER_ONNX_FILE, "
                    f"write it with {ONNX_HINT}, or use RAGRAIL_RERANKER_BACKEND="
                    "sentence-transformers"
                )
            raise FailedPrecondition(f"{path} has no {required}, which {backend} needs{extra}")
        return path
    root = Path.cwd() / Path(settings.models_dir).expanduser()
    found = newest_trained_model(root, required)
    if found is None:
        raise FailedPrecondition(
            f"no reranker model: RAGRAIL_RERANKER_MODEL is empty and {root} "
            "(RAGRAIL_RERANKER_MODELS_DIR) holds no trained "
            f"model with the {required} that {backend} needs; {TRAIN_HINT}, or set "
            "RAGRAIL_RERANKER_MODEL to a cross-encoder directory"
        )
    log.info("using the newest trained reranker", extra={"model": str(found)})
    return found


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FailedPrecondition(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def check_max_length(requested: int, model_max: int, positions: int | None) -> int:
    """The token limit to truncate pairs to: the setting, else the model's own."""
    if requested and positions and requested > positions:
        raise FailedPrecondition(
            f"RAGRAIL_RERANKER_MAX_LENGTH={requested} exceeds the model's {positions} "
            "positions; use a smaller value or 0 for the model's own"
        )
    length = requested or model_max
    return min(length, positions) if positions else length
