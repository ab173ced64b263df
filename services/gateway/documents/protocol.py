"""The bodies of /v1/documents and /v1/ingest/jobs (pydantic v2)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from services.gateway.collections.protocol import COLLECTION_NAME
from services.gateway.http.errors import ErrorBody
from services.gateway.http.validation import MetadataObject


class TextDocument(BaseModel):
    """A document sent as JSON text rather than as a file."""

    name: str = Field(min_length=1, max_length=256, examples=["notes.md"])
    text: str = Field(min_length=1)
    id: str | None = Field(
        None, min_length=1, max_length=256, description="Stable id; defaults to the name."
    )
    content_type: str = Field("text/plain", description="text/plain, text/markdown or text/html.")
    metadata: MetadataObject = Field(default_factory=dict)


class DocumentsIngest(BaseModel):
    collection: str = Field(pattern=COLLECTION_NAME)
    documents: list[TextDocument] = Field(min_length=1)
    metadata: MetadataObject = Field(
        default_factory=dict, description="Merged into every document's metadata."
    )
    chunk_size: int | None = Field(None, ge=16, le=8192)
    chunk_overlap: int | None = Field(None, ge=0, le=4096)


# The ingest routes read their body themselves (multipart files or JSON text): its OpenAPI
# request body is written here, by hand, for POST /v1/documents and POST /v1/ingest/jobs.
_MULTIPART_SCHEMA = {
    "type": "object",
    "required": ["collection", "files"],
    "properties": {
        "collection": {"type": "string", "pattern": COLLECTION_NAME},
        "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
        "metadata": {"type": "string", "description": "JSON object merged into every document."},
        "chunk_size": {"type": "integer"},
        "chunk_overlap": {"type": "integer"},
    },
}
INGEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {"schema": _MULTIPART_SCHEMA},
            "application/json": {"schema": {"$ref": "#/components/schemas/DocumentsIngest"}},
        },
    }
}


class IngestedDocument(BaseModel):
    id: str
    name: str
    content_type: str
    chunks: int
    characters: int
    pages: int | None = Field(None, description="Pages of a paged document (PDF, image).")
    ocr_pages: int = Field(0, description="Pages read with OCR (no usable text layer).")
    tables: int = Field(0, description="Tables stored as Markdown table chunks.")
    warnings: list[str] = Field(
        default_factory=list, description="What was skipped, e.g. a page that could not be read."
    )


class IngestResponse(BaseModel):
    collection: str
    documents: list[IngestedDocument]
    total_chunks: int
    replaced_chunks: int = Field(description="Stale chunks of earlier versions removed.")
    elapsed_ms: float


class DocumentInfo(BaseModel):
    id: str
    name: str
    chunks: int
    metadata: dict[str, Any]


class DocumentList(BaseModel):
    collection: str
    documents: list[DocumentInfo]
    total: int


class DeleteResult(BaseModel):
    deleted_chunks: int


class IngestJobState(StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


class IngestJob(BaseModel):
    """An ingest running in the background (POST /v1/ingest/jobs), and how far it got."""

    id: str
    state: IngestJobState
    collection: str
    documents_total: int = Field(
        description="Documents received; once chunked, those with text to ingest."
    )
    documents_done: int = Field(description="Documents stored so far (each stored whole).")
    chunks_total: int = Field(description="Chunks to embed and store (0 until chunked).")
    chunks_done: int
    pages_total: int = Field(0, description="Pages of the paged documents (PDF, images) found.")
    pages_done: int = Field(0, description="Pages read so far (text layer, tables, OCR).")
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    error: ErrorBody | None = Field(None, description="Why it failed (state failed).")
    result: IngestResponse | None = Field(None, description="What went in (state succeeded).")


class IngestJobList(BaseModel):
    jobs: list[IngestJob] = Field(description="Newest first.")
