"""Objects every endpoint's routes share, created by the app's lifespan and found on
app.state (an endpoint's own object, such as the chat's serving, is fetched by its router).

`async def` on purpose: FastAPI runs a plain `def` dependency in its thread pool, a thread
hop per dependency per request that showed in the gateway's profile."""

from __future__ import annotations

from fastapi import Request

from services.gateway.http.clients import Services
from services.gateway.settings import GatewaySettings


async def get_settings(request: Request) -> GatewaySettings:
    return request.app.state.settings


async def get_services(request: Request) -> Services:
    return request.app.state.services
