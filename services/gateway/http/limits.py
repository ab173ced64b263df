"""Request body size limit as ASGI middleware: 413 before a byte too many is buffered."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.http.asgi import HttpMiddleware
from services.gateway.http.errors import error_response
from services.gateway.http.response_status import ResponseStatus


class _TooLarge(Exception):
    pass


class BodySizeLimit(HttpMiddleware):
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    def _message(self) -> str:
        mb = self.max_bytes / 1024 / 1024
        return (
            f"request body is larger than {mb:g} MB; send fewer or smaller files per request "
            "or raise RAGRAIL_GATEWAY_MAX_REQUEST_MB"
        )

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await error_response(413, self._message(), "PayloadTooLarge")(scope, receive, send)
            return
        seen = 0

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge
            return message

        response = ResponseStatus(send)
        try:
            await self.app(scope, counting_receive, response)
        except _TooLarge:
            if not response.started:
                await error_response(413, self._message(), "PayloadTooLarge")(scope, receive, send)
