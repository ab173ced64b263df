"""Reranker settings: RAGRAIL_RERANKER_* environment variables or the `reranker:` YAML section."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.models.remote import RemoteServerSettings, remote_batch_size_field
from shared.models.settings import (
    DEFAULT_BACKEND,
    REMOTE_BACKENDS,
    RERANKER_MODELS_DIR,
    RERANKER_ONNX_FILE,
    ModelServiceSettings,
    RerankerBackend,
)


class RerankerSettings(ModelServiceSettings.of("reranker"), RemoteServerSettings):
    backend: RerankerBackend = Field(
        DEFAULT_BACKEND,
        description="Model runtime: sentence-transformers (PyTorch), onnx (onnxruntime on CPU, "
        "on the model directory's `onnx_file`), or a model server at "
        "RAGRAIL_RERANKER_REMOTE_URL: rerank (POST {url}/rerank: TEI, infinity, Cohere, vLLM, "
        "llama.cpp's server) or nim (POST {url}/ranking: NVIDIA NIM, url ending in /v1).",
    )
    model: str = Field(
        "",
        description="Path to a cross-encoder model directory; empty loads the newest model "
        "trained into models/reranker/ (relative to the working directory) by "
        "`python -m trainers.reranker`.",
    )
    models_dir: str = Field(
        RERANKER_MODELS_DIR,
        description="Where an empty `model` looks for the newest trained model "
        "(<name>/<version>/ below it); relative paths start at the working directory.",
    )
    onnx_file: str = Field(
        RERANKER_ONNX_FILE,
        description="The onnx backend's file in the model directory: model.onnx (FP32) or "
        "model_int8.onnx (INT8 weights, written by `python -m trainers.quantize reranker`).",
    )
    max_passages: int = Field(1000, ge=1, description="Most passages accepted in one request.")
    # The remote backends' own; RemoteServerSettings holds the URL, model, key and retries.
    remote_batch_size: int = remote_batch_size_field(
        "rerank and nim backends: most passages in one request to the server; more are split "
        "into several (each passage is scored on its own)."
    )
    remote_documents_field: Literal["documents", "texts"] = Field(
        "documents",
        description="rerank backend: the request's field for the passages: documents "
        "(infinity, Cohere, vLLM, llama.cpp's server) or texts (TEI).",
    )
    remote_truncate: Literal["", "NONE", "END"] = Field(
        "",
        description="nim backend: NIM's `truncate` for pairs longer than the model reads "
        '(NONE rejects them, END cuts the passage); "" sends none (NIM\'s default, NONE).',
    )

    @property
    def remote(self) -> bool:
        """Whether a model server scores (no local model directory)."""
        return self.backend in REMOTE_BACKENDS

    @property
    def required_file(self) -> str:
        """The file the backend loads: the ONNX file, or config.json for PyTorch."""
        return self.onnx_file if self.backend == "onnx" else "config.json"
