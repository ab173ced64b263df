"""sentence-transformers backend: a CrossEncoder on PyTorch, from a local model directory."""

from __future__ import annotations

import logging
from typing import ClassVar

import numpy as np

from services.reranker.backends.base import (
    RerankBackend,
    check_max_length,
    read_json,
    resolve_model_dir,
)
from services.reranker.settings import RerankerSettings
from shared.backends import resolve_torch_device
from shared.errors import FailedPrecondition

log = logging.getLogger(__name__)


class SentenceTransformersBackend(RerankBackend):
    name: ClassVar[str] = "sentence-transformers"

    def __init__(self, settings: RerankerSettings) -> None:
        path = resolve_model_dir(settings, "config.json")  # before the slow imports
        from sentence_transformers import CrossEncoder

        self.device = resolve_torch_device(settings.device, "RAGRAIL_RERANKER_DEVICE")
        self.model = CrossEncoder(str(path), device=self.device, local_files_only=True)
        if self.model.num_labels != 1:
            raise FailedPrecondition(
                f"{path} is a cross-encoder with {self.model.num_labels} labels; a reranker "
                "needs one relevance score per pair (num_labels=1)"
            )
        positions = read_json(path / "config.json").get("max_position_embeddings")
        self.max_length = check_max_length(
            settings.max_length, int(self.model.max_seq_length or 512), positions
        )
        self.model.max_seq_length = self.max_length
        self.model_name = str(path)
        self.batch_size = settings.batch_size
        log.info(
            "reranker model loaded",
            extra={"model": str(path), "device": self.device, "max_length": self.max_length},
        )

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        scores = self.model.predict(
            [(query, p) for p in passages],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(scores, dtype=np.float32).reshape(len(passages))
