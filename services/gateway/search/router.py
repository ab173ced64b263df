"""/v1/search: embed the query, retrieve (dense, sparse or hybrid), optionally rerank."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from services.gateway.http.access import authorize, document_filter
from services.gateway.http.clients import Services
from services.gateway.http.deps import get_services, get_settings
from services.gateway.http.errors import error_responses
from services.gateway.http.principals import Action
from services.gateway.search import protocol
from services.gateway.search.plan import RetrievalPlan
from services.gateway.search.serving import retrieve
from services.gateway.settings import GatewaySettings

router = APIRouter(prefix="/v1", tags=["search"])


@router.post(
    "/search",
    response_model=protocol.SearchResponse,
    responses=error_responses([404, 409]),
)
async def search(
    body: protocol.SearchRequest,
    request: Request,
    services: Services = Depends(get_services),
    settings: GatewaySettings = Depends(get_settings),
) -> Response:
    """Searches a collection by meaning (dense), keywords (sparse BM25) or both (hybrid), then
    reranks the first stage with a cross-encoder when a reranker is configured."""
    principal = authorize(request, Action.read, body.collection)
    # Inside the retriever's query, so top-k is taken among the chunks the key may see.
    body.filter = document_filter(principal, body.filter)
    plan = RetrievalPlan.for_search(body, settings, reranker=services.reranker is not None)
    (result,) = await retrieve(services, plan, body.query)
    response = protocol.SearchResponse(
        collection=result.collection,
        mode=body.mode,
        reranked=result.reranked,
        warnings=result.warnings,
        hits=[protocol.SearchHit.of(p) for p in result.passages],
        timings=protocol.SearchTimings(
            embed_ms=result.embed_ms,
            retrieval_ms=result.retrieval_ms,
            rerank_ms=result.rerank_ms,
            total_ms=result.total_ms,
        ),
    )
    # Serialized here, once: FastAPI's response_model path would validate and encode it again
    # (the hottest route's own CPU).
    return Response(response.model_dump_json(), media_type="application/json")
