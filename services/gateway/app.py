"""The gateway's FastAPI application: `create_app(settings)` wires routes, errors, limits,
metrics and the service connections opened in the lifespan."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest

from services.gateway.auth import ApiKeysAndRateLimit, load_keys
from services.gateway.clients import Services
from services.gateway.errors import install_error_handlers
from services.gateway.ingest.pipeline import IngestPipeline
from services.gateway.limits import BodySizeLimit
from services.gateway.rag.pipeline import ChatPipeline
from services.gateway.routes import collections, documents, health, openai, playground, search
from services.gateway.settings import GatewaySettings
from shared.version import VERSION

log = logging.getLogger("ragrail.gateway")
HTTP_REQUESTS = Counter(
    "ragrail_http_requests_total", "Gateway HTTP requests.", ["method", "route", "status"]
)
HTTP_LATENCY = Histogram(
    "ragrail_http_request_duration_seconds",
    "Gateway HTTP request latency.",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    settings = settings or GatewaySettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        services = Services(settings)
        app.state.settings = settings
        app.state.services = services
        app.state.pipeline = IngestPipeline(services, settings)
        app.state.chat = ChatPipeline(services, settings)
        try:
            yield
        finally:
            await services.close()

    app = FastAPI(
        title="ragrail gateway",
        version=VERSION,
        description="Collections, document ingest, hybrid search and OpenAI-compatible grounded "
        "chat over the ragrail services.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    for router in (
        collections.router,
        documents.router,
        search.router,
        openai.router,
        health.router,
        playground.router,
    ):
        app.include_router(router)

    @app.middleware("http")
    async def record_metrics(request: Request, call_next):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        # No span here: FastAPI opens a server span per request itself (continuing the
        # caller's `traceparent`), and the chat stages and service calls nest under it.
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        HTTP_REQUESTS.labels(request.method, path, str(response.status_code)).inc()
        elapsed = time.perf_counter() - start
        HTTP_LATENCY.labels(request.method, path).observe(elapsed)
        if path not in ("/metrics", "/v1/health"):
            log.info(
                "http",
                extra={
                    "method": request.method,
                    "path": path,
                    "status": response.status_code,
                    "ms": round(elapsed * 1000, 2),
                },
            )
        return response

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    # The last added runs first: CORS headers on every answer (401 and 429 too), then keys and
    # rate limits before a body is read, then the body size limit.
    app.add_middleware(BodySizeLimit, max_bytes=int(settings.max_request_mb * 1024 * 1024))
    # Keys are read now, so a missing keys file stops the gateway at start, not at a request.
    app.add_middleware(ApiKeysAndRateLimit, settings=settings, keys=load_keys(settings))
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
        )
    return app
