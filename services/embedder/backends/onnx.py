"""onnx backend: onnxruntime on CPU, on the output of `python -m trainers.quantize embedder`.

The directory holds the transformer as ONNX (`model.onnx` FP32, `model_int8.onnx` INT8; the
`onnx_file` setting picks one; inputs input_ids, attention_mask[, token_type_ids], output
last_hidden_state), the model's tokenizer files and its sentence-transformers configuration
(modules.json, sentence_bert_config.json, the pooling module's config.json). Pooling,
normalisation, truncation and batching follow what sentence-transformers does with the same
model, so vectors match the sentence-transformers backend's (exactly for FP32, cosine above
0.98 for INT8; the quantize command measures it).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from services.embedder.backends.base import EmbeddingBackend, TokenOffsets
from services.embedder.settings import EmbedderSettings
from shared.errors import FailedPrecondition

log = logging.getLogger(__name__)

POOLING_MODES = ("mean", "cls", "max")
SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FailedPrecondition(f"cannot read {path}: {exc}") from exc


def sentence_config(path: Path) -> dict[str, Any]:
    """What sentence-transformers would do around the transformer of the model in `path`:
    {"pooling": "mean" | "cls" | "max", "normalize": bool, "max_seq_length": int | None,
    "do_lower_case": bool}. A directory without modules.json gets mean pooling and no
    normalisation module."""
    config: dict[str, Any] = {
        "pooling": "mean",
        "normalize": False,
        "max_seq_length": None,
        "do_lower_case": False,
    }
    if (path / "sentence_bert_config.json").is_file():
        bert = _read_json(path / "sentence_bert_config.json")
        config["max_seq_length"] = bert.get("max_seq_length")
        config["do_lower_case"] = bool(bert.get("do_lower_case", False))
    if not (path / "modules.json").is_file():
        return config
    for module in _read_json(path / "modules.json"):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind not in SUPPORTED_MODULES:
            raise FailedPrecondition(
                f"{path}: module {module.get('type')} is not supported by the onnx backend "
                f"(only {', '.join(SUPPORTED_MODULES)}); use the sentence-transformers backend"
            )
        if kind == "Normalize":
            config["normalize"] = True
        elif kind == "Pooling":
            pooling_file = path / str(module.get("path", "")) / "config.json"
            if pooling_file.is_file():
                config["pooling"] = pooling_mode(_read_json(pooling_file), pooling_file)
    return config


def pooling_mode(config: dict[str, Any], where: Path) -> str:
    """The single pooling mode a sentence-transformers Pooling config names."""
    if isinstance(config.get("pooling_mode"), str):
        modes = [config["pooling_mode"]]
    else:
        modes = [
            name
            for name, key in (
                ("cls", "pooling_mode_cls_token"),
                ("mean", "pooling_mode_mean_tokens"),
                ("max", "pooling_mode_max_tokens"),
                ("mean_sqrt_len_tokens", "pooling_mode_mean_sqrt_len_tokens"),
                ("weightedmean", "pooling_mode_weightedmean_tokens"),
                ("lasttoken", "pooling_mode_lasttoken"),
            )
            if config.get(key)
        ]
    if len(modes) != 1 or modes[0] not in POOLING_MODES:
        raise FailedPrecondition(
            f"{where}: pooling {modes} is not supported by the onnx backend "
            f"(one of {', '.join(POOLING_MODES)}); use the sentence-transformers backend"
        )
    return modes[0]


class OnnxEncoder:
    """The embedding pipeline on one ONNX file, without service settings.

    `python -m trainers.quantize embedder` measures with this class, so its figures are the
    service's. `embed` sorts texts by length (longest first, as sentence-transformers does),
    runs batches of `batch_size`, pools and returns the vectors in input order.
    """

    def __init__(
        self,
        path: Path,
        onnx_file: str = "model_int8.onnx",
        *,
        threads: int = 0,
        batch_size: int = 32,
        max_length: int = 0,
        normalize: bool = True,
        spinning: bool = True,
    ) -> None:
        """`spinning=False`: idle intra-op threads sleep instead of spinning after a run, for
        callers that run small batches between other CPU work on few cores (the guardrails
        service: spinning threads there took CPU from the next rail and doubled a check)."""
        import onnxruntime as ort
        from transformers import AutoTokenizer

        if not path.is_dir():
            raise FailedPrecondition(
                f"embedder model directory {path} does not exist; write one with "
                "`python -m trainers.quantize embedder --out DIR`"
            )
        file = path / onnx_file
        if not file.is_file():
            present = sorted(p.name for p in path.glob("*.onnx"))
            raise FailedPrecondition(
                f"{file} does not exist (ONNX files there: {present or 'none'}); set "
                "RAGRAIL_EMBEDDER_ONNX_FILE, or write the directory with "
                "`python -m trainers.quantize embedder --out DIR`"
            )
        self.path = path
        self.file = file
        self.config = sentence_config(path)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        if not getattr(self.tokenizer, "is_fast", True):
            raise FailedPrecondition(f"{path}: tokenizer.json (a fast tokenizer) is missing")
        hf_config = _read_json(path / "config.json") if (path / "config.json").is_file() else {}
        positions = hf_config.get("max_position_embeddings")
        model_length = self.config["max_seq_length"] or min(
            int(self.tokenizer.model_max_length), int(positions or 512)
        )
        self.max_length = int(max_length or model_length)
        if isinstance(positions, int) and self.max_length > positions:
            raise FailedPrecondition(
                f"max_length {self.max_length} exceeds the model's {positions} positions; "
                "set RAGRAIL_EMBEDDER_MAX_LENGTH to at most that"
            )
        # Tokenize is used on whole documents, longer than the model's window by design.
        self.tokenizer.model_max_length = 10**9
        self.pooling = self.config["pooling"]
        # sentence-transformers normalises when asked to or when the model ends in Normalize.
        self.normalize = normalize or bool(self.config["normalize"])
        self.batch_size = batch_size
        self.threads = threads or len(os.sched_getaffinity(0))

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        if not spinning:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(
            str(file), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.input_names = [i.name for i in self.session.get_inputs()]
        missing = sorted(set(self.input_names) - set(self.tokenizer.model_input_names))
        if missing:
            raise FailedPrecondition(
                f"{file} takes inputs {missing} that the tokenizer does not produce; export it "
                "again with `python -m trainers.quantize embedder`"
            )
        width = self.session.get_outputs()[0].shape[-1]
        self.dimension = int(width) if isinstance(width, int) else self.embed(["x"]).shape[1]

    def _encode(self, texts: list[str], **kwargs: Any) -> Any:
        if self.config["do_lower_case"]:
            texts = [t.lower() for t in texts]
        return self.tokenizer(texts, **kwargs)

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """One forward pass: float32 (len(texts), dimension), pooled and maybe normalised."""
        encoded = self._encode(
            texts,
            padding=True,
            truncation="longest_first",
            max_length=self.max_length,
            return_tensors="np",
        )
        feeds = {name: np.asarray(encoded[name], dtype=np.int64) for name in self.input_names}
        hidden = np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)
        mask = np.asarray(encoded["attention_mask"], dtype=np.float32)[:, :, None]
        if self.pooling == "cls":
            vectors = hidden[:, 0]
        elif self.pooling == "max":
            vectors = np.where(mask > 0, hidden, np.float32(-1e9)).max(axis=1)
        else:
            vectors = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        if self.normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.clip(norms, 1e-12, None)
        return vectors.astype(np.float32, copy=False)

    def batches(self, texts: list[str]) -> list[np.ndarray]:
        """Index arrays of the batches `embed` runs: longest texts first, like
        sentence-transformers, so each batch pads little."""
        order = np.argsort([-len(t) for t in texts], kind="stable")
        return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, getattr(self, "dimension", 0)), dtype=np.float32)
        out: np.ndarray | None = None
        for rows in self.batches(texts):
            vectors = self.embed_batch([texts[i] for i in rows])
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        assert out is not None
        return out

    def tokenize(self, texts: list[str]) -> list[TokenOffsets]:
        encoded = self._encode(
            texts, add_special_tokens=False, return_offsets_mapping=True, truncation=False
        )
        return [
            TokenOffsets([s for s, _ in offsets], [e for _, e in offsets])
            for offsets in encoded["offset_mapping"]
        ]

    def count_tokens(self, texts: list[str]) -> int:
        encoded = self._encode(texts, truncation=True, max_length=self.max_length)
        return sum(len(ids) for ids in encoded["input_ids"])


class OnnxBackend(EmbeddingBackend):
    name: ClassVar[str] = "onnx"

    def __init__(self, settings: EmbedderSettings) -> None:
        if settings.device not in ("cpu", "auto"):
            raise FailedPrecondition(
                f"RAGRAIL_EMBEDDER_DEVICE={settings.device}: the onnx backend runs on cpu only; "
                "use cpu, or RAGRAIL_EMBEDDER_BACKEND=sentence-transformers for a GPU"
            )
        path = settings.onnx_model_dir()
        self.encoder = OnnxEncoder(
            path,
            settings.onnx_file,
            threads=settings.torch_threads,
            batch_size=settings.batch_size,
            max_length=settings.max_length,
            normalize=settings.normalize,
        )
        self.device = "cpu"
        self.model_name = str(path / settings.onnx_file)
        self.dimension = self.encoder.dimension
        self.max_length = self.encoder.max_length
        self.normalized = self.encoder.normalize
        self.tokenizer = self.encoder.tokenizer
        log.info(
            "embedder model loaded",
            extra={
                "model": self.model_name,
                "device": self.device,
                "dimension": self.dimension,
                "threads": self.encoder.threads,
            },
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.encoder.embed(texts)

    def tokenize(self, texts: list[str]) -> list[TokenOffsets]:
        return self.encoder.tokenize(texts)

    def count_tokens(self, texts: list[str]) -> int:
        return self.encoder.count_tokens(texts)
