"""/v1/search: embed the query, search the retriever, return chunks with scores."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends

from services.gateway import schemas
from services.gateway.clients import Services
from services.gateway.deps import get_services, get_settings
from services.gateway.settings import GatewaySettings
from shared.proto.ragrail.v1 import embedder_pb2, retriever_pb2
from shared.structs import dict_to_struct, struct_to_dict

router = APIRouter(prefix="/v1", tags=["search"])

_MODES = {
    schemas.SearchMode.dense: retriever_pb2.SEARCH_MODE_DENSE,
    schemas.SearchMode.sparse: retriever_pb2.SEARCH_MODE_SPARSE,
    schemas.SearchMode.hybrid: retriever_pb2.SEARCH_MODE_HYBRID,
}
_FUSIONS = {
    schemas.FusionMethod.rrf: retriever_pb2.FUSION_METHOD_RRF,
    schemas.FusionMethod.weighted: retriever_pb2.FUSION_METHOD_WEIGHTED,
}


@router.post(
    "/search",
    response_model=schemas.SearchResponse,
    responses={404: {"model": schemas.ErrorResponse}},
)
async def search(
    body: schemas.SearchRequest,
    services: Services = Depends(get_services),
    settings: GatewaySettings = Depends(get_settings),
) -> schemas.SearchResponse:
    """Searches a collection by meaning (dense), by keywords (sparse BM25) or both (hybrid)."""
    started = time.perf_counter()
    vector: list[float] = []
    if body.mode != schemas.SearchMode.sparse:
        reply = await services.embedder.call(
            "Embed",
            embedder_pb2.EmbedRequest(texts=[body.query], input_type=embedder_pb2.INPUT_TYPE_QUERY),
        )
        vector = list(reply.embeddings[0].values)
    embedded = time.perf_counter()
    request = retriever_pb2.SearchRequest(
        collection=body.collection,
        query_text=body.query,
        query_vector=vector,
        mode=_MODES[body.mode],
        top_k=body.top_k or settings.default_top_k,
        fusion=_FUSIONS[body.fusion],
        rrf_k=body.rrf_k or 0,
        dense_weight=body.dense_weight or 0.0,
        sparse_weight=body.sparse_weight or 0.0,
        candidate_k=body.vdb_top_k or 0,
    )
    if body.filter:
        request.filter.CopyFrom(dict_to_struct(body.filter))
    result = await services.retriever.call("Search", request)
    done = time.perf_counter()
    return schemas.SearchResponse(
        collection=body.collection,
        mode=body.mode,
        hits=[
            schemas.SearchHit(
                chunk_id=h.chunk.id,
                document_id=h.chunk.document_id,
                document_name=h.chunk.document_name,
                chunk_index=h.chunk.chunk_index,
                text=h.chunk.text,
                score=h.score,
                dense_score=h.dense_score if h.dense_rank else None,
                sparse_score=h.sparse_score if h.sparse_rank else None,
                metadata=struct_to_dict(h.chunk.metadata),
            )
            for h in result.hits
        ],
        timings=schemas.SearchTimings(
            embed_ms=round((embedded - started) * 1000, 2),
            retrieval_ms=round((done - embedded) * 1000, 2),
            total_ms=round((done - started) * 1000, 2),
        ),
    )
