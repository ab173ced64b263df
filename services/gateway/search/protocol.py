"""The body of /v1/search and its answer (pydantic v2). The retrieval depths are named as in
the RetrievalPlan, `fetch_k` (candidates from the retriever) and `keep_k` (kept after
reranking); `vdb_top_k`, `top_k` and `reranker_top_k` are their names on the wire."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from services.gateway.collections.protocol import COLLECTION_NAME
from services.gateway.http.validation import FilterObject

if TYPE_CHECKING:
    from services.gateway.search.passage import Passage


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
    # The depths by their meaning (RetrievalPlan's names); on the wire, their API names.
    keep_k: int | None = Field(None, alias="top_k", ge=1, le=1000)
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
    fetch_k: int | None = Field(
        None,
        alias="vdb_top_k",
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
    # keep_k when the first stage is reranked (without reranking top_k rules).
    reranked_keep_k: int | None = Field(
        None,
        alias="reranker_top_k",
        ge=1,
        le=1000,
        description="Chunks kept after reranking; default top_k.",
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
        # Each field from the passage's attribute of the same name. Validated construction:
        # in pydantic v2 it is faster than model_construct.
        return cls(**{name: getattr(p, name) for name in cls.model_fields})


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
