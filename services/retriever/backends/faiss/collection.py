"""One open collection of the FAISS backend: its table, its in-memory indexes and its lock."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.retriever.backends.base import CollectionRecord
from services.retriever.backends.faiss.bm25 import Bm25Index
from services.retriever.backends.faiss.table import ChunkTable


@dataclass
class OpenCollection:
    """Every field is guarded by `lock`, which serialises the collection's writes, lazy
    rebuilds and searches: FAISS indexes must not be searched while being modified."""

    name: str
    path: Path
    table: ChunkTable
    record: CollectionRecord
    analyzer: str
    generation: int  # the table's write generation
    lock: threading.RLock = field(default_factory=threading.RLock)
    closed: bool = False
    index: Any = None  # CPU faiss index; None until loaded or built, or after a dirtying write
    index_generation: int = -1
    gpu_index: Any = None  # search copy on the GPUs, rebuilt lazily after changes
    saved_generation: int = -1
    saved_at: float = field(default_factory=time.monotonic)
    bm25: Bm25Index | None = None

    def drop_indexes(self) -> None:
        self.index = self.gpu_index = self.bm25 = None
