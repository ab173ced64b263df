"""Reranker settings: RAGRAIL_RERANKER_* environment variables or the `reranker:` YAML section."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from shared.settings import (
    DEFAULT_PORTS,
    ServiceSettings,
    metrics_port_field,
    port_field,
    service_config,
)


class RerankerSettings(ServiceSettings):
    service_name: ClassVar[str] = "reranker"
    model_config = service_config("reranker")

    port: int = port_field(DEFAULT_PORTS["reranker"][0])
    metrics_port: int = metrics_port_field(DEFAULT_PORTS["reranker"][1])
    backend: Literal["sentence-transformers", "onnx"] = Field(
        "sentence-transformers",
        description="Scoring implementation (services/reranker/backends): sentence-transformers "
        "(PyTorch) or onnx (onnxruntime on the model directory's `onnx_file`).",
    )
    model: str = Field(
        "",
        description="Path to a cross-encoder model directory; empty loads the newest model "
        "trained into models/reranker/ (relative to the working directory) by "
        "`python -m trainers.reranker`.",
    )
    models_dir: str = Field(
        "models/reranker",
        description="Where an empty `model` looks for the newest trained model "
        "(<name>/<version>/ below it); relative paths start at the working directory.",
    )
    # FP32 by default: `trainers.reranker --export-onnx` writes only model.onnx, so the
    # default must load a freshly trained model; model_int8.onnx needs
    # `python -m trainers.quantize reranker`.
    onnx_file: str = Field(
        "model.onnx",
        description="The onnx backend's file in the model directory: model.onnx (FP32) or "
        "model_int8.onnx (INT8 weights, written by `python -m trainers.quantize reranker`).",
    )
    device: str = Field(
        "cpu",
        description="cpu, cuda, cuda:N, or auto (cuda when available); the onnx backend runs "
        "on cpu only.",
    )
    batch_size: int = Field(32, ge=1, le=1024, description="Query-passage pairs per forward pass.")
    max_length: int = Field(
        0,
        ge=0,
        description="Truncate each query-passage pair to this many tokens; 0 keeps the model's.",
    )
    max_passages: int = Field(1000, ge=1, description="Most passages accepted in one request.")
    max_text_chars: int = Field(
        200_000, ge=1, description="Longest query or passage text accepted."
    )
