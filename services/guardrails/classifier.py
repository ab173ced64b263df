"""The prompt-injection classifier `python -m trainers.guardrails` writes: an ONNX sentence
encoder (INT8 by default) and a linear head in head.json. Loaded once at startup; any file
that does not load stops the service with the file named."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from shared.errors import FailedPrecondition

log = logging.getLogger(__name__)

HEAD_FILE = "head.json"
HEAD_FORMAT = "ragrail-injection-classifier/1"
TRAINED_MODELS = Path("models") / "guardrails"
TRAIN_HINT = (
    "train one with `python -m trainers.guardrails --data ../shared/data/prompt_injections` "
    "(it saves to models/guardrails/<name>/<version>/)"
)


def load_encoder(path: Path, onnx_file: str, threads: int, max_length: int = 0) -> Any:
    """services/embedder's ONNX pipeline on `path/onnx_file`; a file onnxruntime or the
    tokenizer cannot read is reported by name, never passed over."""
    from services.embedder.backends.onnx import OnnxEncoder

    file = path / onnx_file
    try:
        # No spinning: a check runs a few short model calls between Python rails on few
        # cores, and threads spinning after each call took the CPU from the rest (measured
        # in process: input check 18-26 -> 7-10 ms, output check 96-100 -> 53-55 ms).
        return OnnxEncoder(
            path,
            onnx_file,
            threads=threads,
            max_length=max_length,
            normalize=True,
            spinning=False,
        )
    except FailedPrecondition:
        raise
    except Exception as exc:
        raise FailedPrecondition(
            f"cannot load the model in {path} (ONNX file {file}): {type(exc).__name__}: "
            f"{str(exc)[:300]}; train it again or point the setting at another directory"
        ) from exc


class InjectionClassifier:
    """score(texts) -> logits; a text is an injection when its logit >= threshold."""

    def __init__(self, path: Path, threads: int = 0, onnx_file: str = "") -> None:
        head_file = path / HEAD_FILE
        if not head_file.is_file():
            raise FailedPrecondition(f"{path} has no {HEAD_FILE}; {TRAIN_HINT}")
        try:
            head = json.loads(head_file.read_text(encoding="utf-8"))
            if head.get("format") != HEAD_FORMAT:
                raise ValueError(f"format {head.get('format')!r}, expected {HEAD_FORMAT!r}")
            self.weights = np.asarray(head["weights"], dtype=np.float32)
            self.bias = float(head["bias"])
            self.threshold = float(head["threshold"])
            encoder = head["encoder"]
            self.onnx_file = onnx_file or str(encoder["onnx_file"])
            max_length = int(encoder.get("max_length") or 0)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FailedPrecondition(f"cannot read {head_file}: {exc}") from exc
        self.path = path
        self.head = head
        self.encoder = load_encoder(path, self.onnx_file, threads, max_length)
        if self.weights.shape != (self.encoder.dimension,):
            raise FailedPrecondition(
                f"{head_file}: {self.weights.shape[0]} weights for a {self.encoder.dimension}-d "
                f"encoder ({path / self.onnx_file}); the files come from different trainings"
            )
        log.info(
            "injection classifier loaded",
            extra={"model": str(path / self.onnx_file), "threshold": self.threshold},
        )

    @property
    def frozen_base(self) -> bool:
        """True when the encoder is the packaged MiniLM as is (trained with --method head), so
        its vectors also serve as general sentence embeddings."""
        return (self.head.get("trained") or {}).get("method") == "head"

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.encoder.embed(texts)

    def scores(self, vectors: np.ndarray) -> np.ndarray:
        return (vectors @ self.weights + self.bias).astype(np.float32)


def newest_model(root: Path) -> Path | None:
    from services.reranker.backends.base import newest_trained_model

    return newest_trained_model(root, HEAD_FILE)


def resolve_injection_model(setting: str) -> Path:
    if setting:
        path = Path(setting).expanduser()
        if not path.is_dir():
            raise FailedPrecondition(
                f"injection model directory {path} does not exist "
                f"(RAGRAIL_GUARDRAILS_INJECTION_MODEL); {TRAIN_HINT}"
            )
        return path
    root = Path.cwd() / TRAINED_MODELS
    found = newest_model(root)
    if found is None:
        raise FailedPrecondition(
            f"no prompt-injection model: RAGRAIL_GUARDRAILS_INJECTION_MODEL is empty and {root} "
            f"holds no directory with {HEAD_FILE}; {TRAIN_HINT}"
        )
    log.info("using the newest trained injection classifier", extra={"model": str(found)})
    return found
