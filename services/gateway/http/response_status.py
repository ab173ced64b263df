"""The status of the response an ASGI app sends, for middleware that records it afterwards
(the HTTP metrics, the audit log) or that may still answer in its place until it has started
(the body size limit, unhandled errors)."""

from __future__ import annotations

from starlette.types import Message, Send


class ResponseStatus:
    """Wraps `send`, noting the status as the response starts; 500 until then, which is what
    the client sees if the app raises before answering."""

    def __init__(self, send: Send) -> None:
        self.code = 500
        self.started = False
        self._send = send

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.code = message["status"]
            self.started = True
        await self._send(message)
