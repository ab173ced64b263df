"""The gateway's FastAPI application: `create_app(settings)` wires routes, errors, limits,
metrics and the service connections opened in the lifespan."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Response
from fastapi.middleware.cors import CORSMiddleware
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from services.gateway.chat import router as chat
from services.gateway.chat.serving import ChatServing
from services.gateway.collections import router as collections
from services.gateway.collections.serving import CollectionsServing
from services.gateway.documents import jobs_router as ingest_jobs
from services.gateway.documents import router as documents
from services.gateway.documents.ingest import ocr
from services.gateway.documents.ingest.request import ocr_options
from services.gateway.documents.protocol import DocumentsIngest
from services.gateway.documents.serving import DocumentsServing
from services.gateway.http import health
from services.gateway.http.auth import ApiKeysAndRateLimit
from services.gateway.http.browser_safety import BrowserSafety
from services.gateway.http.clients import Services
from services.gateway.http.disconnect import install_disconnect_handler
from services.gateway.http.errors import install_error_handlers
from services.gateway.http.failures import FailureAccounting, UnhandledErrors
from services.gateway.http.limits import BodySizeLimit
from services.gateway.http.metrics import RequestMetrics
from services.gateway.http.openapi import install_openapi
from services.gateway.http.principals import Keys
from services.gateway.http.validation import JsonBodyGuard
from services.gateway.playground import router as playground
from services.gateway.search import router as search
from services.gateway.settings import GatewaySettings
from shared.server import on_sighup
from shared.version import VERSION

log = logging.getLogger("ragrail.gateway")


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    settings = settings or GatewaySettings()
    # Keys are read now, so a missing keys file stops the gateway at start, not at a request.
    keys = Keys(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        no_ocr = ocr.unavailable_reason(ocr_options(settings)) if settings.ocr else None
        if no_ocr is not None:
            # Said once at start; each document with pages left out says it again.
            log.warning("%s; scanned PDF pages are left out and images refused", no_ocr)
        services = Services(settings)
        app.state.settings = settings
        app.state.services = services
        # Each endpoint's serving object, fetched by its router.
        app.state.chat = ChatServing(services, settings)
        app.state.documents = DocumentsServing(services, settings)
        app.state.collections = CollectionsServing(services)
        app.state.keys = keys
        # SIGHUP re-reads the key file: a key removed there is refused from the next request.
        # Signals reach only the main thread (uvloop says ValueError, asyncio RuntimeError).
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            on_sighup(_reload_keys(keys))
        try:
            yield
        finally:
            await app.state.documents.close()
            await services.close()

    app = FastAPI(
        title="ragrail gateway",
        version=VERSION,
        description="Collections, document ingest, hybrid search and OpenAI-compatible grounded "
        "chat over the ragrail services.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    install_disconnect_handler(app)
    # The ingest routes read their body themselves (multipart or JSON): its schema by hand.
    install_openapi(app, extra_models=(DocumentsIngest,))
    for router in (
        collections.router,
        documents.router,
        ingest_jobs.router,
        search.router,
        chat.router,
        health.router,
        playground.router,
    ):
        app.include_router(router)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    # The last added runs first: CORS headers on every answer (401 and 429 too), then keys and
    # rate limits before a body is read, then the body size limit, then metrics and the log
    # line (so a 401, 413 or 429 is not counted as a route's latency).
    # Innermost: a JSON body's lone surrogates refused for every route at once.
    app.add_middleware(JsonBodyGuard)
    app.add_middleware(RequestMetrics)
    app.add_middleware(BodySizeLimit, max_bytes=int(settings.max_request_mb * 1024 * 1024))
    # An exception no handler took is answered here, on a connection that stays usable; outside
    # BodySizeLimit, whose own exception turns into its 413.
    app.add_middleware(UnhandledErrors)
    app.add_middleware(ApiKeysAndRateLimit, settings=settings, keys=keys)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
        )
    # Outermost: foreign Host names and cross-origin writes refused before anything else, and
    # every failed answer (these refusals, 401, 413 and 429 included) counted and logged.
    app.add_middleware(BrowserSafety, settings=settings, keyless=not keys.ring)
    app.add_middleware(FailureAccounting)
    return app


def _reload_keys(keys: Keys) -> Callable[[], Awaitable[bool]]:
    async def reload() -> bool:
        return keys.reload()

    return reload
