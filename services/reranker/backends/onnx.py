"""onnx backend: onnxruntime on an ONNX file of the model directory, with its own tokenizer.

`python -m trainers.reranker --export-onnx` writes model.onnx next to the PyTorch weights
(inputs input_ids, attention_mask[, token_type_ids]; output logits of shape (batch, 1));
`python -m trainers.quantize reranker` writes a directory with model.onnx and its INT8 copy
model_int8.onnx. The `onnx_file` setting picks the file. With model.onnx, scores equal the
sentence-transformers backend's within float tolerance: the same tokenizer, truncation and
activation (sigmoid unless the model's configuration names another); model_int8.onnx stays
within the score difference its model card reports.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import ClassVar

import numpy as np

from services.reranker.backends.base import (
    ONNX_HINT,
    RerankBackend,
    check_max_length,
    read_json,
    resolve_model_dir,
)
from services.reranker.settings import RerankerSettings
from shared.errors import FailedPrecondition

log = logging.getLogger(__name__)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))  # 1 / (1 + e^-x) without overflow for large -x


def _identity(x: np.ndarray) -> np.ndarray:
    return x


def activation_of(path: Path) -> str:
    """The activation sentence-transformers' CrossEncoder would apply to this model's logits,
    as the dotted name it saves (config_sentence_transformers.json, or config.json before v5)."""
    st_config = path / "config_sentence_transformers.json"
    if st_config.is_file() and read_json(st_config).get("activation_fn"):
        return str(read_json(st_config)["activation_fn"])
    config = read_json(path / "config.json")
    nested = config.get("sentence_transformers") or {}
    name = nested.get("activation_fn") or config.get("sbert_ce_default_activation_function")
    return str(name) if name else "torch.nn.modules.activation.Sigmoid"


class OnnxCrossEncoder:
    """The scoring pipeline on one ONNX file, without service settings.

    `python -m trainers.quantize reranker` measures with this class, so its figures are the
    service's. `predict` scores (query, passage) pairs, longest first in batches of
    `batch_size`, and returns the activated scores in input order.
    """

    def __init__(
        self,
        path: Path,
        onnx_file: str = "model.onnx",
        *,
        threads: int = 0,
        batch_size: int = 32,
        max_length: int = 0,
    ) -> None:
        import onnxruntime as ort
        from transformers import AutoTokenizer

        file = path / onnx_file
        if not file.is_file():
            present = sorted(p.name for p in path.glob("*.onnx")) if path.is_dir() else []
            raise FailedPrecondition(
                f"{file} does not exist (ONNX files there: {present or 'none'}); set "
                f"RAGRAIL_RERANKER_ONNX_FILE, or write it with {ONNX_HINT}"
            )
        self.path = path
        self.file = file
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        positions = read_json(path / "config.json").get("max_position_embeddings")
        self.max_length = check_max_length(
            max_length, int(min(self.tokenizer.model_max_length, 10**6)), positions
        )
        activation = activation_of(path)
        if activation.endswith(".Sigmoid"):
            self._activation = _sigmoid
        elif activation.endswith(".Identity"):
            self._activation = _identity
        else:
            raise FailedPrecondition(
                f"{path}: activation {activation} is not supported by the onnx backend "
                "(Sigmoid or Identity); use RAGRAIL_RERANKER_BACKEND=sentence-transformers"
            )
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if threads:
            options.intra_op_num_threads = threads
        # Idle threads sleep instead of spinning: the suite shares few cores between services.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(
            str(file), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.input_names = [i.name for i in self.session.get_inputs()]
        missing = sorted(set(self.input_names) - set(self.tokenizer.model_input_names))
        if missing:
            raise FailedPrecondition(
                f"{file} takes inputs {missing} that its tokenizer does not produce; "
                "export it again with `python -m trainers.reranker`"
            )
        width = self.session.get_outputs()[0].shape[-1]
        if isinstance(width, int) and width != 1:
            raise FailedPrecondition(
                f"{file} outputs {width} logits per pair; a reranker needs one"
            )
        self.batch_size = batch_size

    def predict(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """float32 scores of shape (len(pairs),), in input order."""
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


class OnnxBackend(RerankBackend):
    name: ClassVar[str] = "onnx"

    def __init__(self, settings: RerankerSettings) -> None:
        if settings.device not in ("cpu", "auto"):
            raise FailedPrecondition(
                f"RAGRAIL_RERANKER_DEVICE={settings.device}: the onnx backend runs on cpu only; "
                "use cpu, or RAGRAIL_RERANKER_BACKEND=sentence-transformers for a GPU"
            )
        path = resolve_model_dir(settings, settings.onnx_file)  # before the slow imports
        self.encoder = OnnxCrossEncoder(
            path,
            settings.onnx_file,
            batch_size=settings.batch_size,
            max_length=settings.max_length,
        )
        self.device = "cpu"
        self.max_length = self.encoder.max_length
        self.model_name = str(path)
        self.batch_size = settings.batch_size
        log.info(
            "reranker model loaded",
            extra={
                "model": os.fspath(self.encoder.file),
                "device": self.device,
                "max_length": self.max_length,
            },
        )

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        return self.encoder.predict([(query, p) for p in passages])
