"""Gateway settings: RAGRAIL_GATEWAY_* environment variables or the `gateway:` YAML section."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from shared.settings import DEFAULT_PORTS, RagrailSettings, port_field, service_config


def _local(service: str) -> str:
    return f"127.0.0.1:{DEFAULT_PORTS[service][0]}"


class GatewaySettings(RagrailSettings):
    service_name: ClassVar[str] = "gateway"
    model_config = service_config("gateway")

    host: str = Field("127.0.0.1", description="Interface to bind; 0.0.0.0 in containers.")
    port: int = port_field(DEFAULT_PORTS["gateway"][0], "HTTP port (API, docs and /metrics)")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Log level."
    )
    log_format: Literal["json", "text"] = Field(
        "json", description="json: one object per line; text: for people at a terminal."
    )
    shutdown_grace_s: float = Field(
        10.0, ge=0, description="In-flight requests get this long on SIGTERM."
    )

    embedder_url: str = Field(_local("embedder"), description="host:port of the embedder service.")
    reranker_url: str = Field(
        "",
        description="host:port of the reranker service; empty means searches are not "
        "reranked (ragrail up sets it when it starts a reranker).",
    )
    retriever_url: str = Field(
        _local("retriever"), description="host:port of the retriever service."
    )

    request_timeout_s: float = Field(30.0, gt=0, description="Deadline of a search request.")
    ingest_timeout_s: float = Field(600.0, gt=0, description="Deadline of an ingest request.")
    max_request_mb: float = Field(
        100.0, gt=0, description="Largest request body accepted (413 above)."
    )
    max_files_per_request: int = Field(1000, ge=1, description="Most files in one upload.")
    chunk_size: int = Field(
        0, ge=0, description="Tokens per chunk; 0 fits the embedder's max input length."
    )
    chunk_overlap: int = Field(32, ge=0, description="Tokens shared by consecutive chunks.")
    embed_batch_size: int = Field(128, ge=1, description="Chunks per call to the embedder.")
    default_top_k: int = Field(10, ge=1, description="Results when a search gives no top_k.")
    cors_origins: list[str] = Field(default_factory=list, description="Origins allowed by CORS.")
