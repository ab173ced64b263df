"""A retrieved chunk as the gateway handles it, from the retriever's hit to the REST search
hit, the prompt's numbered source and the chat citation (each serialized from this one)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from shared.proto.ragrail.v1 import retriever_pb2
from shared.structs import struct_to_dict


@dataclass(frozen=True, slots=True)
class Passage:
    chunk_id: str
    document_id: str
    document_name: str
    chunk_index: int
    text: str
    collection: str
    # What the passage is ordered by: the first stage's score, the cross-encoder's, or the
    # fused score of both (rerank_fusion=rrf).
    score: float
    dense_score: float | None = None
    sparse_score: float | None = None
    rerank_score: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_hit(
        cls,
        hit: retriever_pb2.SearchHit,
        collection: str,
        *,
        rerank_score: float | None = None,
        score: float | None = None,
    ) -> Passage:
        """From a retriever hit; `score` overrides the ordering score (default: the rerank
        score when there is one, else the first stage's)."""
        chunk = hit.chunk
        if score is None:
            score = hit.score if rerank_score is None else rerank_score
        return cls(
            chunk_id=chunk.id,
            document_id=chunk.document_id,
            document_name=chunk.document_name,
            chunk_index=chunk.chunk_index,
            text=chunk.text,
            collection=collection,
            score=score,
            # A rank of 0 means the mode did not find it: no score, rather than 0.
            dense_score=hit.dense_score if hit.dense_rank else None,
            sparse_score=hit.sparse_score if hit.sparse_rank else None,
            rerank_score=rerank_score,
            metadata=struct_to_dict(chunk.metadata),
        )

    @property
    def page(self) -> int | None:
        """First page of a paged document the chunk is from (ingest stores it)."""
        page = self.metadata.get("page")
        return int(page) if isinstance(page, int | float) and not isinstance(page, bool) else None

    @property
    def pages(self) -> list[int] | None:
        """Every page the chunk spans; [page] for chunks stored before pages were."""
        pages = self.metadata.get("pages")
        if isinstance(pages, list) and pages:
            return [int(p) for p in pages if isinstance(p, int | float)]
        page = self.page
        return None if page is None else [page]

    def with_text(self, text: str) -> Passage:
        """The same passage with other text (a rail redacted it)."""
        return dataclasses.replace(self, text=text)
