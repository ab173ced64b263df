"""Every request and response body of the gateway's REST API (pydantic v2)."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from services.gateway.validation import FilterObject, MetadataObject

if TYPE_CHECKING:
    from services.gateway.passage import Passage

COLLECTION_NAME = r"^[a-z][a-z0-9_]{0,63}$"


class ErrorBody(BaseModel):
    message: str
    type: str
    code: int


class ErrorResponse(BaseModel):
    error: ErrorBody


class CollectionCreate(BaseModel):
    name: str = Field(pattern=COLLECTION_NAME, examples=["docs"])
    description: str = Field("", max_length=1000)


class Collection(BaseModel):
    name: str
    dimension: int
    description: str = ""
    created_at: float = 0.0
    num_chunks: int | None = None
    num_documents: int | None = None


class CollectionList(BaseModel):
    collections: list[Collection]


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


class SearchMode(StrEnum):
    dense = "dense"
    sparse = "sparse"
    hybrid = "hybrid"


class FusionMethod(StrEnum):
    rrf = "rrf"
    weighted = "weighted"


class RerankFusion(StrEnum):
    none = "none"
    rrf = "rrf"


class SearchRequest(BaseModel):
    query: str = Field(min_length=1, max_length=10_000, examples=["how do bees communicate"])
    collection: str = Field(pattern=COLLECTION_NAME)
    top_k: int | None = Field(None, ge=1, le=1000)
    mode: SearchMode = SearchMode.hybrid
    filter: FilterObject | None = Field(
        None,
        description='Metadata filter, e.g. {"year": {"$gte": 2020}, "document_id": "a.md"}; '
        "operators $eq $ne $gt $gte $lt $lte $in $nin, $any on list fields (tags, access_groups); "
        "keys are ANDed, $and takes a list of filter objects.",
    )
    fusion: FusionMethod = FusionMethod.rrf
    rrf_k: int | None = Field(None, ge=1, le=10_000)
    dense_weight: float | None = Field(None, ge=0, le=1)
    sparse_weight: float | None = Field(None, ge=0, le=1)
    vdb_top_k: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="Chunks taken from the retriever (first stage); default top_k, or 50 "
        "when reranking.",
    )
    rerank: bool | None = Field(
        None,
        description="Rerank the first stage with the cross-encoder; default: when a "
        "reranker is configured.",
    )
    reranker_top_k: int | None = Field(
        None, ge=1, le=1000, description="Chunks kept after reranking; default top_k."
    )
    rerank_fusion: RerankFusion | None = Field(
        None,
        description="none: order by the cross-encoder alone; rrf: reciprocal rank fusion of "
        "the first stage's order and the cross-encoder's. Default: the gateway's setting.",
    )


class SearchHit(BaseModel):
    chunk_id: str
    document_id: str
    document_name: str
    chunk_index: int
    text: str
    score: float
    dense_score: float | None = None
    sparse_score: float | None = None
    rerank_score: float | None = None
    page: int | None = Field(None, description="First page of a paged document it is from.")
    pages: list[int] | None = Field(None, description="Every page it spans.")
    metadata: dict[str, Any]

    @classmethod
    def of(cls, p: Passage) -> SearchHit:
        # Validated construction: in pydantic v2 it is faster than model_construct.
        return cls(
            chunk_id=p.chunk_id,
            document_id=p.document_id,
            document_name=p.document_name,
            chunk_index=p.chunk_index,
            text=p.text,
            score=p.score,
            dense_score=p.dense_score,
            sparse_score=p.sparse_score,
            rerank_score=p.rerank_score,
            page=p.page,
            pages=p.pages,
            metadata=p.metadata,
        )


class SearchTimings(BaseModel):
    embed_ms: float
    retrieval_ms: float
    rerank_ms: float = 0.0
    total_ms: float


class SearchResponse(BaseModel):
    collection: str
    mode: SearchMode
    reranked: bool = False
    warnings: list[str] = Field(
        default_factory=list, description="Stages skipped or degraded, and why."
    )
    hits: list[SearchHit]
    timings: SearchTimings


class ServiceHealth(BaseModel):
    status: str
    target: str
    latency_ms: float


class Health(BaseModel):
    status: str = Field(description="ok when every service is SERVING, else degraded.")
    services: dict[str, ServiceHealth]


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
