"""Cross-encoders: one relevance score per (query, passage) pair, on PyTorch or onnxruntime,
and how the reranker's model directory is found.

`python -m trainers.reranker --export-onnx` writes model.onnx next to the PyTorch weights
(inputs input_ids, attention_mask[, token_type_ids]; output logits of shape (batch, 1));
`python -m trainers.quantize reranker` writes a directory with model.onnx and its INT8 copy
model_int8.onnx. With model.onnx, `OnnxCrossEncoder` scores equal `TorchCrossEncoder`'s
within float tolerance: the same tokenizer, truncation and activation (sigmoid unless the
model's configuration names another); model_int8.onnx stays within the score difference
its model card reports.

The reranker service serves either; the guardrails' groundedness rail and the quantizer use
the same classes, so their figures are the service's.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from shared.errors import FailedPrecondition
from shared.models import registry, runtime
from shared.models.runtime import read_object

log = logging.getLogger(__name__)

ROLE = "reranker"
# Where `python -m trainers.reranker` saves models by default: <name>/<version>/ below it.
TRAINED_MODELS = f"models/{ROLE}"
TRAIN_HINT = (
    "train one with `python -m trainers.reranker --data <BEIR directory> --export-onnx` "
    "(it saves to models/reranker/<name>/<version>/)"
)
ONNX_HINT = (
    "`python -m trainers.reranker ... --export-onnx` (model.onnx) or "
    "`python -m trainers.quantize reranker --model DIR --out DIR` (model.onnx and model_int8.onnx)"
)
Pair = tuple[str, str]


class CrossEncoder(ABC):
    """What the reranker service needs of a cross-encoder."""

    name: ClassVar[str]  # the backend: sentence-transformers or onnx
    model_name: str
    max_length: int
    device: str
    batch_size: int  # pairs per forward pass (a model server: per request)

    @abstractmethod
    def predict(self, pairs: list[Pair]) -> np.ndarray:
        """float32 scores of shape (len(pairs),), in input order, higher meaning more
        relevant."""

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """One score per passage against `query`, in input order."""
        return self.predict([(query, p) for p in passages])

    def close(self) -> None:  # noqa: B027 - a hook: local models hold nothing to release
        """Releases what the model holds beyond memory (a model server's connections)."""


def check_max_length(requested: int, model_max: int, positions: int | None) -> int:
    """The token limit to truncate pairs to: the setting, else the model's own."""
    if requested and positions and requested > positions:
        raise FailedPrecondition(
            f"RAGRAIL_RERANKER_MAX_LENGTH={requested} exceeds the model's {positions} "
            "positions; use a smaller value or 0 for the model's own"
        )
    length = requested or model_max
    return min(length, positions) if positions else length


class TorchCrossEncoder(CrossEncoder):
    """A sentence-transformers CrossEncoder on PyTorch, from a local model directory."""

    name: ClassVar[str] = "sentence-transformers"

    def __init__(
        self, model: Any, *, batch_size: int = 32, model_name: str = "", device: str = ""
    ) -> None:
        """`model`: a loaded sentence-transformers CrossEncoder (`load` reads one)."""
        self.model = model
        self.batch_size = batch_size
        self.model_name = model_name
        self.max_length = int(model.max_seq_length or 512)
        self.device = device or str(model.device)

    @classmethod
    def load(
        cls, path: Path, *, device: str = "cpu", max_length: int = 0, batch_size: int = 32
    ) -> TorchCrossEncoder:
        from sentence_transformers import CrossEncoder as StCrossEncoder

        model = StCrossEncoder(str(path), device=device, local_files_only=True)
        if model.num_labels != 1:
            raise FailedPrecondition(
                f"{path} is a cross-encoder with {model.num_labels} labels; a reranker "
                "needs one relevance score per pair (num_labels=1)"
            )
        positions = read_object(path / "config.json").get("max_position_embeddings")
        model.max_seq_length = check_max_length(
            max_length, int(model.max_seq_length or 512), positions
        )
        return cls(model, batch_size=batch_size, model_name=str(path), device=device)

    def predict(self, pairs: list[Pair]) -> np.ndarray:
        scores = self.model.predict(
            pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
        return np.asarray(scores, dtype=np.float32).reshape(len(pairs))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))  # 1 / (1 + e^-x) without overflow for large -x


def _identity(x: np.ndarray) -> np.ndarray:
    return x


def activation_of(path: Path) -> str:
    """The activation sentence-transformers' CrossEncoder would apply to this model's logits,
    as the dotted name it saves (config_sentence_transformers.json, or config.json before v5)."""
    st_config = path / "config_sentence_transformers.json"
    if st_config.is_file() and read_object(st_config).get("activation_fn"):
        return str(read_object(st_config)["activation_fn"])
    config = read_object(path / "config.json")
    nested = config.get("sentence_transformers") or {}
    name = nested.get("activation_fn") or config.get("sbert_ce_default_activation_function")
    return str(name) if name else "torch.nn.modules.activation.Sigmoid"


class OnnxCrossEncoder(runtime.OnnxModel, CrossEncoder):
    """The scoring pipeline on one ONNX file: `predict` scores (query, passage) pairs,
    longest first in batches of `batch_size`, and returns the activated scores in input
    order. Idle onnxruntime threads sleep between calls (runtime.session)."""

    name: ClassVar[str] = "onnx"
    default_file = "model.onnx"
    file_setting = "RAGRAIL_RERANKER_ONNX_FILE"
    export_hint = ONNX_HINT

    def setup(self) -> None:
        self.model_name = str(self.path)
        activation = activation_of(self.path)
        if activation.endswith(".Sigmoid"):
            self._activation = _sigmoid
        elif activation.endswith(".Identity"):
            self._activation = _identity
        else:
            raise FailedPrecondition(
                f"{self.path}: activation {activation} is not supported by the onnx backend "
                "(Sigmoid or Identity); use RAGRAIL_RERANKER_BACKEND=sentence-transformers"
            )
        width = self.session.get_outputs()[0].shape[-1]
        if isinstance(width, int) and width != 1:
            raise FailedPrecondition(
                f"{self.file} outputs {width} logits per pair; a reranker needs one"
            )

    def token_limit(self, requested: int) -> int:
        positions = read_object(self.path / "config.json").get("max_position_embeddings")
        return check_max_length(
            requested, int(min(self.tokenizer.model_max_length, 10**6)), positions
        )

    def predict(self, pairs: list[Pair]) -> np.ndarray:
        scores = np.empty(len(pairs), dtype=np.float32)
        # Longest first, like sentence-transformers: batches of similar length pad less.
        order = np.argsort([-len(q) - len(p) for q, p in pairs], kind="stable")
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            encoded = self.tokenizer(
                [pairs[i][0] for i in rows],
                [pairs[i][1] for i in rows],
                padding=True,
                truncation="longest_first",
                max_length=self.max_length,
                return_tensors="np",
            )
            feeds = {name: encoded[name].astype(np.int64) for name in self.input_names}
            logits = self.session.run(None, feeds)[0]
            scores[rows] = self._activation(logits.reshape(len(rows)).astype(np.float32))
        return scores


# -- discovery ----------------------------------------------------------------------------


def newest_reranker(required: str = "config.json", models_dir: str = "") -> Path | None:
    """The newest trained reranker holding `required` (config.json for PyTorch, an ONNX file
    for onnxruntime) under `models_dir` (default models/reranker/, from the working
    directory)."""
    entry = registry.newest(ROLE, required, role_dir=models_dir or TRAINED_MODELS)
    return entry.path if entry else None


def find_reranker(model: str, models_dir: str, backend: str, required: str) -> Path:
    """The reranker model directory: `model` (RAGRAIL_RERANKER_MODEL) when set, else the
    newest trained one under `models_dir`; it must hold `required`, which `backend` loads."""
    needs = f"the {backend} backend"
    path = registry.configured_dir(
        model,
        "reranker model directory {path} does not exist; set RAGRAIL_RERANKER_MODEL to a local "
        f"cross-encoder directory (models are never downloaded), or {TRAIN_HINT}",
    )
    if path is not None:
        if not (path / required).is_file():
            extra = ""
            if required.endswith(".onnx"):
                extra = (
                    f" (ONNX files there: {runtime.onnx_files(path) or 'none'}); set "
                    f"RAGRAIL_RERANKER_ONNX_FILE, write it with {ONNX_HINT}, or use "
                    "RAGRAIL_RERANKER_BACKEND=sentence-transformers"
                )
            raise FailedPrecondition(f"{path} has no {required}, which {needs} needs{extra}")
        return path
    root = Path.cwd() / Path(models_dir).expanduser()
    found = newest_reranker(required, str(root))
    if found is None:
        raise FailedPrecondition(
            f"no reranker model: RAGRAIL_RERANKER_MODEL is empty and {root} "
            "(RAGRAIL_RERANKER_MODELS_DIR) holds no trained "
            f"model with the {required} that {needs} needs; {TRAIN_HINT}, or set "
            "RAGRAIL_RERANKER_MODEL to a cross-encoder directory"
        )
    log.info("using the newest trained reranker", extra={"model": str(found)})
    return found
