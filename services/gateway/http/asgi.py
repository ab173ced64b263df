"""The base of the gateway's pure ASGI middleware: each acts on HTTP requests only, and the
lifespan's messages pass straight through to the app.

Plain ASGI rather than Starlette's `@app.middleware("http")` (BaseHTTPMiddleware), which runs
every request through an extra task and memory stream: on /v1/search that cost a measurable
share of the gateway's own time (docs/history/benchmarks-2026-11.md)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from starlette.types import ASGIApp, Receive, Scope, Send


class HttpMiddleware(ABC):
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    @abstractmethod
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One HTTP request: answer it, or hand it on to `self.app`."""
