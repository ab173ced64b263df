"""/v1/search: embed the query, retrieve (dense, sparse or hybrid), optionally rerank."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from services.gateway import schemas
from services.gateway.clients import Services
from services.gateway.deps import get_services, get_settings
from services.gateway.search import run_search
from services.gateway.settings import GatewaySettings

router = APIRouter(prefix="/v1", tags=["search"])


@router.post(
    "/search",
    response_model=schemas.SearchResponse,
    responses={404: {"model": schemas.ErrorResponse}, 409: {"model": schemas.ErrorResponse}},
)
async def search(
    body: schemas.SearchRequest,
    services: Services = Depends(get_services),
    settings: GatewaySettings = Depends(get_settings),
) -> Response:
    """Searches a collection by meaning (dense), keywords (sparse BM25) or both (hybrid), then
    reranks the first stage with a cross-encoder when a reranker is configured."""
    result = await run_search(services, settings, body)
    # Serialized here: the model was built and validated by run_search; FastAPI's
    # response_model path would validate and encode it again (the hottest route's own CPU).
    return Response(result.model_dump_json(), media_type="application/json")
