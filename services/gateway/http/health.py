"""/v1/health: the gateway and the status of every service it depends on."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from services.gateway.http.clients import Services
from services.gateway.http.deps import get_services

router = APIRouter(prefix="/v1", tags=["health"])


class ServiceHealth(BaseModel):
    status: str
    target: str
    latency_ms: float


class Health(BaseModel):
    status: str = Field(description="ok when every service is SERVING, else degraded.")
    services: dict[str, ServiceHealth]


@router.get(
    "/health",
    response_model=Health,
    responses={503: {"model": Health, "description": "A service is not serving."}},
)
async def health(services: Services = Depends(get_services)) -> JSONResponse:
    statuses = await services.health()
    body = Health(
        status="ok" if all(s == "SERVING" for s, _, _ in statuses.values()) else "degraded",
        services={
            name: ServiceHealth(status=s, target=t, latency_ms=round(ms, 2))
            for name, (s, t, ms) in statuses.items()
        },
    )
    return JSONResponse(body.model_dump(), status_code=200 if body.status == "ok" else 503)
