"""The interface every embedding backend implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np


@dataclass
class TokenOffsets:
    starts: list[int]
    ends: list[int]


class EmbeddingBackend(ABC):
    name: ClassVar[str]
    model_name: str
    dimension: int
    max_length: int
    normalized: bool
    device: str

    @abstractmethod
    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dimension), in input order."""

    @abstractmethod
    def tokenize(self, texts: list[str]) -> list[TokenOffsets]:
        """Character offsets of each token, special tokens excluded, no truncation."""

    @abstractmethod
    def count_tokens(self, texts: list[str]) -> int:
        """Tokens the model sees for these texts after truncation, special tokens included."""
