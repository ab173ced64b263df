"""Sequence classifiers: an ONNX sentence encoder (INT8 by default) and a linear head, as
`python -m trainers.guardrails.baseline` writes them, and how the prompt-injection classifier
is found.

The head is `head.json` beside the encoder:

    {"format": "ragrail-injection-classifier/1",
     "encoder": {"onnx_file": "model_int8.onnx", "max_length": 256, ...},
     "weights": [...], "bias": 0.1, "threshold": 1.5,        # one label: a logit per text
     "labels": ["injection"]}                                # optional

Scores are `vectors @ weights.T + bias`: one logit per text for a one-label head (weights a
vector), one per label for a multi-label head (weights one row per label, bias and
threshold one per label). A text carries a label when its logit reaches the threshold.
`labels` and `threshold` are read from head.json, else from the directory's manifest.json.
Everything is loaded once, at startup; a file that does not load stops the caller with the
file named.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from shared.errors import FailedPrecondition
from shared.models import registry
from shared.models.encoder import OnnxEncoder

log = logging.getLogger(__name__)

HEAD_FILE = "head.json"
INJECTION_ROLE = "guardrails"
INJECTION_FORMAT = "ragrail-injection-classifier/1"
INJECTION_MODELS = f"models/{INJECTION_ROLE}"
INJECTION_TRAIN_HINT = (
    "train one with `python -m trainers.guardrails.baseline --data "
    "../shared/data/prompt_injections` "
    "(it saves to models/guardrails/<name>/<version>/)"
)


def load_encoder(path: Path, onnx_file: str, threads: int, max_length: int = 0) -> OnnxEncoder:
    """The ONNX sentence encoder in `path/onnx_file`, normalised, with idle threads sleeping;
    a file onnxruntime or the tokenizer cannot read is reported by name, never passed over."""
    file = path / onnx_file
    try:
        # No spinning: a guardrails check runs a few short model calls between Python rails
        # on few cores, and threads spinning after each call took the CPU from the rest
        # (measured in process: input check 18-26 -> 7-10 ms, output check 96-100 -> 53-55 ms).
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


class SequenceClassifier:
    """score(vectors) -> logits; a text carries a label when its logit >= the threshold.

    Subclasses name the head format they load (`head_format`), the labels a head without
    `labels` has, and how to train one (`train_hint`)."""

    head_format: ClassVar[str | None] = None  # None: any format
    default_labels: ClassVar[tuple[str, ...]] = ("positive",)
    train_hint: ClassVar[str] = "train it again"
    kind: ClassVar[str] = "sequence"

    def __init__(self, path: Path, threads: int = 0, onnx_file: str = "") -> None:
        head_file = path / HEAD_FILE
        if not head_file.is_file():
            raise FailedPrecondition(f"{path} has no {HEAD_FILE}; {self.train_hint}")
        manifest = registry.read_manifest(path)
        try:
            head = json.loads(head_file.read_text(encoding="utf-8"))
            if self.head_format and head.get("format") != self.head_format:
                raise ValueError(f"format {head.get('format')!r}, expected {self.head_format!r}")
            self.weights = np.asarray(head["weights"], dtype=np.float32)
            single = self.weights.ndim == 1
            bias, threshold = head["bias"], head.get("threshold", manifest.get("threshold"))
            if threshold is None:
                raise KeyError("threshold")
            self.bias: Any = float(bias) if single else np.asarray(bias, dtype=np.float32)
            self.threshold: Any = (
                float(threshold) if single else np.asarray(threshold, dtype=np.float32)
            )
            self.labels = [
                str(x) for x in head.get("labels") or manifest.get("labels") or self.default_labels
            ]
            if len(self.labels) != (1 if single else self.weights.shape[0]):
                raise ValueError(f"{len(self.labels)} labels for weights {self.weights.shape}")
            encoder = head["encoder"]
            self.onnx_file = onnx_file or str(encoder["onnx_file"])
            max_length = int(encoder.get("max_length") or 0)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FailedPrecondition(f"cannot read {head_file}: {exc}") from exc
        self.path = path
        self.head = head
        self.encoder = load_encoder(path, self.onnx_file, threads, max_length)
        if self.weights.shape[-1] != self.encoder.dimension:
            raise FailedPrecondition(
                f"{head_file}: {self.weights.shape[-1]} weights for a {self.encoder.dimension}"
                f"-d encoder ({path / self.onnx_file}); the files come from different trainings"
            )
        log.info(
            f"{self.kind} classifier loaded",
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
        """(n,) logits for a one-label head, (n, labels) for a multi-label one."""
        return (vectors @ self.weights.T + self.bias).astype(np.float32)

    def flagged(self, vectors: np.ndarray) -> np.ndarray:
        """Whether each text carries each label (shaped as `scores`)."""
        return np.asarray(self.scores(vectors) >= self.threshold)


class InjectionClassifier(SequenceClassifier):
    """The prompt-injection classifier: one logit, "injection"."""

    head_format = INJECTION_FORMAT
    default_labels = ("injection",)
    train_hint = INJECTION_TRAIN_HINT
    kind = "injection"


def newest_injection_model(models_dir: str = "") -> Path | None:
    """The newest trained injection classifier (a directory holding head.json) under
    `models_dir` (default models/guardrails/, from the working directory)."""
    entry = registry.newest(INJECTION_ROLE, HEAD_FILE, role_dir=models_dir or INJECTION_MODELS)
    return entry.path if entry else None


def find_injection_model(setting: str) -> Path:
    """RAGRAIL_GUARDRAILS_INJECTION_MODEL when set, else the newest trained classifier."""
    path = registry.configured_dir(
        setting,
        "injection model directory {path} does not exist (RAGRAIL_GUARDRAILS_INJECTION_MODEL); "
        + INJECTION_TRAIN_HINT,
    )
    if path is not None:
        return path
    root = Path.cwd() / INJECTION_MODELS
    found = newest_injection_model(str(root))
    if found is None:
        raise FailedPrecondition(
            f"no prompt-injection model: RAGRAIL_GUARDRAILS_INJECTION_MODEL is empty and {root} "
            f"holds no directory with {HEAD_FILE}; {INJECTION_TRAIN_HINT}"
        )
    log.info("using the newest trained injection classifier", extra={"model": str(found)})
    return found
