"""Every failed request counted and logged once, and unhandled errors answered on a connection
that stays usable.

`FailureAccounting` is the outermost middleware: it sees every answer, the 401, 403, 413, 421
and 429 that other middlewares give before any route runs included, and for each one of 400
or more it counts `ragrail_http_failures_total{status,type}` (type: the error body's `type`,
e.g. Unauthenticated, RateLimited, PayloadTooLarge, InvalidArgument, Unavailable) and writes
one log line with the error's message. (RequestMetrics logs only the requests that succeed.)

`UnhandledErrors` turns an exception no handler took into the gateway's JSON 500 *inside* the
app. Starlette's own last-resort handler sends the same answer and then re-raises, and uvicorn
closes the connection after an exception without having said `Connection: close`, so a
pooled client's next request on that connection failed.
"""

from __future__ import annotations

import json
import logging
import time
import uuid

from prometheus_client import Counter
from starlette.types import Message, Receive, Scope, Send

from services.gateway.http.asgi import HttpMiddleware
from services.gateway.http.errors import error_response
from services.gateway.http.response_status import ResponseStatus

log = logging.getLogger("ragrail.gateway")

HTTP_FAILURES = Counter(
    "ragrail_http_failures_total",
    "Gateway answers with a status of 400 or more, by status and error type (the error "
    "body's type: Unauthenticated, RateLimited, PayloadTooLarge, InvalidArgument, "
    "ClientDisconnected, Unavailable, Internal, ...).",
    ["status", "type"],
)
# Enough of an error body to read its type and message; error bodies are small.
_BODY_KEPT = 4096
_MESSAGE_LOGGED = 500


def _error_of(body: bytes) -> tuple[str, str]:
    try:
        error = json.loads(body)["error"]
        return str(error.get("type") or "HTTPError"), str(error.get("message") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return "HTTPError", body[:200].decode("utf-8", "replace")


class FailureAccounting(HttpMiddleware):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        status = 0
        body = bytearray()

        async def watching_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif (
                status >= 400 and len(body) < _BODY_KEPT and message["type"] == "http.response.body"
            ):
                body.extend(message.get("body", b"")[: _BODY_KEPT - len(body)])
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        except BaseException:
            # Starlette's last-resort handler answered 500 (or nothing was sent at all).
            self._record(scope, status or 500, b"", start)
            raise
        if status >= 400:
            self._record(scope, status, bytes(body), start)

    @staticmethod
    def _record(scope: Scope, status: int, body: bytes, start: float) -> None:
        kind, message = _error_of(body) if body else ("Internal", "")
        HTTP_FAILURES.labels(str(status), kind).inc()
        route = getattr(scope.get("route"), "path", None)
        extra = {
            "method": scope.get("method"),
            "path": scope.get("path"),
            "route": route,
            "status": status,
            "type": kind,
            "error": message[:_MESSAGE_LOGGED],
            "ms": round((time.perf_counter() - start) * 1000, 2),
            "client": (scope.get("client") or ("", 0))[0],
        }
        key_id = (scope.get("state") or {}).get("api_key_id")
        if key_id:
            extra["api_key_id"] = key_id
        if status >= 500:
            log.warning("request failed", extra=extra)
        elif status == 499:
            log.info("client left before the answer", extra=extra)
        else:
            log.info("request refused", extra=extra)


class UnhandledErrors(HttpMiddleware):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = ResponseStatus(send)
        try:
            await self.app(scope, receive, response)
        except Exception:
            if response.started:
                raise  # mid-response: closing the connection is all that is left
            rid = uuid.uuid4().hex[:16]
            log.exception("unhandled error", extra={"path": scope.get("path"), "request_id": rid})
            await error_response(
                500,
                f"internal error (request id {rid}); the gateway log has the details",
                "Internal",
            )(scope, receive, send)
