"""Per-request Prometheus metrics and the access log line, as plain ASGI middleware.

It wraps `send` and records when the response starts (why plain ASGI: http/asgi.py)."""

from __future__ import annotations

import logging
import time

from prometheus_client import Counter, Histogram
from starlette.types import Receive, Scope, Send

from services.gateway.http.asgi import HttpMiddleware
from services.gateway.http.response_status import ResponseStatus

log = logging.getLogger("ragrail.gateway")
HTTP_REQUESTS = Counter(
    "ragrail_http_requests_total", "Gateway HTTP requests.", ["method", "route", "status"]
)
HTTP_LATENCY = Histogram(
    "ragrail_http_request_duration_seconds",
    "Gateway HTTP request latency (to the last byte of the response).",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
# Polled constantly by health checks and Prometheus: counted, never logged.
QUIET_ROUTES = frozenset({"/metrics", "/v1/health"})


class RequestMetrics(HttpMiddleware):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        recorded = ResponseStatus(send)
        try:
            await self.app(scope, receive, recorded)
        finally:
            # The route is known once routing ran (in the app, after this middleware).
            path = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"]
            elapsed = time.perf_counter() - start
            status = recorded.code
            HTTP_REQUESTS.labels(method, path, str(status)).inc()
            HTTP_LATENCY.labels(method, path).observe(elapsed)
            # A failure gets its one log line, with its error, from failures.FailureAccounting.
            if path not in QUIET_ROUTES and status < 400:
                log.info(
                    "http",
                    extra={
                        "method": method,
                        "path": path,
                        "status": status,
                        "ms": round(elapsed * 1000, 2),
                    },
                )
