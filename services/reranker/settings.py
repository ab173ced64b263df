"""Reranker settings: RAGRAIL_RERANKER_* environment variables or the `reranker:` YAML section."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from shared.models.settings import RERANKER_MODELS_DIR, RERANKER_ONNX_FILE, ModelServiceSettings
from shared.settings import DEFAULT_PORTS, metrics_port_field, port_field, service_config


class RerankerSettings(ModelServiceSettings):
    service_name: ClassVar[str] = "reranker"
    model_config = service_config("reranker")

    port: int = port_field(DEFAULT_PORTS["reranker"][0])
    metrics_port: int = metrics_port_field(DEFAULT_PORTS["reranker"][1])
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

    @property
    def required_file(self) -> str:
        """The file the backend loads: the ONNX file, or config.json for PyTorch."""
        return self.onnx_file if self.backend == "onnx" else "config.json"
