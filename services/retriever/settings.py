"""Retriever settings: RAGRAIL_RETRIEVER_* environment variables or YAML `retriever:`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.settings import ServiceSettings, timeout_field


class RetrieverSettings(ServiceSettings.of("retriever")):
    backend: Literal["milvus", "faiss"] = Field(
        "milvus",
        description="Vector store implementation (services/retriever/backends): milvus (Milvus "
        "Lite or a server) or faiss (in this process, files under faiss_dir).",
    )
    milvus_uri: str = Field(
        "./data/ragrail.db",
        description="Milvus Lite file (ends in .db) or a Milvus server, e.g. http://milvus:19530.",
    )
    milvus_token: str = Field("", description="user:password or API key for a Milvus server.")
    milvus_db_name: str = Field("", description="Milvus database; empty uses the default one.")
    milvus_timeout_s: float = timeout_field(10.0, "Deadline of each call to Milvus.")
    milvus_index_type: Literal["AUTOINDEX", "FLAT", "HNSW", "IVF_FLAT"] = Field(
        "AUTOINDEX",
        description="Dense index Milvus builds for new collections: AUTOINDEX, FLAT (exact), "
        "HNSW or IVF_FLAT.",
    )
    faiss_dir: str = Field(
        "./data/faiss",
        description="Directory of the faiss backend: one sub-directory per collection. Only one "
        "process may use it at a time.",
    )
    faiss_index: Literal["flat", "hnsw", "ivf"] = Field(
        "flat",
        description="Dense index of the faiss backend: flat (exact), hnsw or ivf (approximate). "
        "Changing it rebuilds each collection's index from its stored vectors.",
    )
    faiss_use_gpu: Literal["auto", "never", "always"] = Field(
        "auto",
        description="Search flat and ivf indexes on the GPU: auto when faiss sees one, never, "
        "or always (fails to start without one).",
    )
    bm25_language: str = Field(
        "english",
        description="Snowball stemmer for BM25 terms (english, german, ...); empty disables "
        "stemming. Collections keep the analysis they were built with.",
    )
    max_top_k: int = Field(1000, ge=1, description="Largest fetch_k a search may ask for.")
    max_candidate_k: int = Field(2000, ge=1, description="Most candidates fetched per mode.")
    max_chunks_per_upsert: int = Field(10_000, ge=1, description="Most chunks in one upsert.")
    max_chunk_chars: int = Field(60_000, ge=1, description="Longest chunk text accepted.")
