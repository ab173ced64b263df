"""`ragrail_onnx`: a NeMo Guardrails embedding provider on onnxruntime, so NeMo Guardrails and
the topic and groundedness rails embed with a local INT8 MiniLM, offline, in milliseconds.

NeMo Guardrails builds providers from the config's `models` entry (`engine: ragrail_onnx`,
`model: <name>`). `model: default` is the directory the service resolved at startup (see
`set_default`); any other value is a path to a directory written by
`python -m trainers.quantize embedder` or `python -m trainers.guardrails`. Encoders are
loaded once per (directory, file) and shared.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import numpy as np
from nemoguardrails.embeddings.providers import register_embedding_provider
from nemoguardrails.embeddings.providers.base import EmbeddingModel

from shared.models.classifier import load_encoder

ENGINE = "ragrail_onnx"
DEFAULT_MODEL = "default"
_lock = threading.Lock()
_default: dict[str, Any] = {}
_encoders: dict[tuple[str, str], Any] = {}


def set_default(path: Path, onnx_file: str, threads: int, max_length: int = 0) -> None:
    """What `model: default` means in this process (set again on each reload)."""
    _default.clear()
    _default.update(path=path, onnx_file=onnx_file, threads=threads, max_length=max_length)


def set_default_encoder(loaded: Any) -> None:
    """`model: default` is this loaded encoder (the packaged MiniLM before a guard model is
    trained)."""
    _default.clear()
    _default.update(encoder=loaded)


def packaged() -> Any:
    """The packaged all-MiniLM-L6-v2 on numpy (minilm.py), loaded once per process."""
    from services.guardrails.minilm import PackagedMiniLM

    key = ("packaged", "all-MiniLM-L6-v2")
    with _lock:
        if key not in _encoders:
            _encoders[key] = PackagedMiniLM()
        return _encoders[key]


def encoder(path: Path, onnx_file: str, threads: int = 0, max_length: int = 0) -> Any:
    key = (str(path.resolve()), onnx_file)
    with _lock:
        if key not in _encoders:
            _encoders[key] = load_encoder(path, onnx_file, threads, max_length)
        return _encoders[key]


class OnnxEmbeddingModel(EmbeddingModel):
    engine_name = ENGINE

    def __init__(self, embedding_model: str, **kwargs: Any) -> None:
        if embedding_model == DEFAULT_MODEL:
            if not _default:
                raise RuntimeError("ragrail_onnx: no default embedding model was set")
            self.encoder = _default.get("encoder") or encoder(
                _default["path"],
                _default["onnx_file"],
                _default["threads"],
                _default["max_length"],
            )
        else:
            self.encoder = encoder(
                Path(embedding_model).expanduser(),
                str(kwargs.get("onnx_file", "model_int8.onnx")),
                int(kwargs.get("threads", 0)),
            )
        self.embedding_size = self.encoder.dimension

    def embed(self, documents: list[str]) -> np.ndarray:
        return np.asarray(self.encoder.embed(list(documents)), dtype=np.float32)

    def encode(self, documents: list[str]) -> list[list[float]]:
        return self.embed(documents).tolist()  # type: ignore[no-any-return]

    async def encode_async(self, documents: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.encode, documents)


register_embedding_provider(OnnxEmbeddingModel, ENGINE)
