"""Settings of the model services (embedder, reranker), and the few model settings that
`ragrail up` reads on its own to tell whether a service can start.

`ModelServiceSettings` holds what both model services have: a backend (sentence-transformers
on PyTorch, onnx, or a remote model server), a model, the ONNX file, a device, batch and input
limits; each service narrows `backend` to the ones it has. The choice
classes below read only a service's model fields, from the same environment variables and
YAML section as the service; the service's own settings class validates the rest when it
starts. Defaults both sides share are the constants here.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.settings import RagrailSettings, ServiceSettings

# Local runtimes, then the remote ones: the embedder's `openai` (any /v1/embeddings server) and
# the reranker's `rerank` (TEI, infinity, Cohere: POST /rerank) and `nim` (NIM's /v1/ranking).
LocalBackend = Literal["sentence-transformers", "onnx"]
EmbedderBackend = Literal["sentence-transformers", "onnx", "openai"]
RerankerBackend = Literal["sentence-transformers", "onnx", "rerank", "nim"]
Backend = Literal["sentence-transformers", "onnx", "openai", "rerank", "nim"]
REMOTE_BACKENDS: frozenset[str] = frozenset({"openai", "rerank", "nim"})
DEFAULT_BACKEND: LocalBackend = "sentence-transformers"
# The reranker's: trainers.reranker --export-onnx writes only model.onnx (FP32), so the default
# loads a freshly trained model; model_int8.onnx needs `python -m trainers.quantize reranker`.
RERANKER_ONNX_FILE = "model.onnx"
RERANKER_MODELS_DIR = "models/reranker"


class ModelServiceSettings(ServiceSettings):
    """Settings every model service has; subclasses add their own and refine descriptions."""

    backend: Backend = Field(
        DEFAULT_BACKEND,
        description="Model runtime: sentence-transformers (PyTorch) or onnx (onnxruntime on "
        "CPU, on the model directory's `onnx_file`); each service adds its remote backends.",
    )
    model: str = Field("", description="Path to the model directory.")
    onnx_file: str = Field(
        "model_int8.onnx",
        description="The onnx backend's file in the model directory: model_int8.onnx (INT8 "
        "weights) or model.onnx (FP32).",
    )
    device: str = Field(
        "cpu",
        description="cpu, cuda, cuda:N, or auto (cuda when available); the onnx backend runs "
        "on cpu only.",
    )
    batch_size: int = Field(32, ge=1, le=1024, description="Inputs per forward pass.")
    max_length: int = Field(
        0, ge=0, description="Truncate inputs to this many tokens; 0 keeps the model's."
    )
    max_text_chars: int = Field(200_000, ge=1, description="Longest single text accepted.")


class RerankerChoice(RagrailSettings):
    """The reranker's model settings alone (RAGRAIL_RERANKER_BACKEND, _MODEL, _ONNX_FILE,
    _MODELS_DIR). A remote backend (`remote`) needs no model directory: its model lives on
    the model server RAGRAIL_RERANKER_REMOTE_URL names."""

    service_name: ClassVar[str] = "reranker"
    model_config = SettingsConfigDict(env_prefix="RAGRAIL_RERANKER_", extra="ignore")

    backend: RerankerBackend = DEFAULT_BACKEND
    model: str = ""
    onnx_file: str = RERANKER_ONNX_FILE
    models_dir: str = RERANKER_MODELS_DIR

    @property
    def required_file(self) -> str:
        """The file the backend loads: the ONNX file, or config.json for PyTorch."""
        return self.onnx_file if self.backend == "onnx" else "config.json"

    @property
    def remote(self) -> bool:
        """Whether the backend is a model server's (no local model directory to find)."""
        return self.backend in REMOTE_BACKENDS


class GuardrailsChoice(RagrailSettings):
    """The guardrails service's model settings alone (RAGRAIL_GUARDRAILS_GUARD_MODEL,
    _INJECTION_MODEL, or the YAML `guardrails:` section), read as the service reads them."""

    service_name: ClassVar[str] = "guardrails"
    model_config = SettingsConfigDict(env_prefix="RAGRAIL_GUARDRAILS_", extra="ignore")

    guard_model: str = ""
    injection_model: str = ""


class ReaderChoice(RagrailSettings):
    """The gateway's extractive reader setting alone (RAGRAIL_GATEWAY_CHAT_READER_MODEL, or the
    YAML `gateway:` section): a registry reference, "none", or "" for the newest trained."""

    service_name: ClassVar[str] = "gateway"
    model_config = SettingsConfigDict(env_prefix="RAGRAIL_GATEWAY_", extra="ignore")

    chat_reader_model: str = ""
