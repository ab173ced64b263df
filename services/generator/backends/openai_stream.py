"""The openai engine's reading of a completion stream: server-sent events in, Chunks out
(a token per piece of text, the server's usage where it says more)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from services.generator.backends.base import Chunk, FinishReason

_FINISH = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH}


class StreamError(Exception):
    """An error event in the stream (vLLM and others send {"error": {...}} mid-answer)."""


class StreamReader:
    """Turns a completion stream's events into Chunks: a token per piece of text, the finish
    reason kept until the stream ends, where a usage event may still follow."""

    def __init__(self) -> None:
        self.tokens = 0
        self.reason: FinishReason | None = None
        self.tail = ""
        self.usage: int | None = None

    def feed(self, event: dict[str, Any]) -> list[Chunk]:
        if "error" in event:
            error = event["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise StreamError(str(message)[:300])
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.usage = usage["completion_tokens"]
        out: list[Chunk] = []
        for choice in event.get("choices") or []:
            delta = choice.get("delta")
            text = (delta.get("content") if isinstance(delta, dict) else choice.get("text")) or ""
            if choice.get("finish_reason"):
                self.reason = _FINISH.get(choice["finish_reason"], FinishReason.STOP)
                self.tail += text  # sent with the last chunk, once usage is known
            elif text:
                self.tokens += 1
                out.append(Chunk(text, 1))
        return out

    def end(self) -> Chunk | None:
        """The last chunk, when the stream said why it ended."""
        if self.reason is None:
            return None
        counted = self.tokens + (1 if self.tail else 0)
        tokens = 1 if self.tail else 0
        if self.usage is not None and self.usage > counted:
            tokens += self.usage - counted  # the server's count wins where it says more
        return Chunk(self.tail, tokens, self.reason)


async def read_sse(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON events of a server-sent event stream, until `data: [DONE]` or its end."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            payload, data = "\n".join(data), []
            if payload.strip() == "[DONE]":
                return
            try:
                event = json.loads(payload)
            except ValueError as exc:
                raise StreamError(f"unreadable event {payload[:100]!r}") from exc
            if isinstance(event, dict):
                yield event
        # ":" comments (keep-alive pings), event: and id: lines carry nothing for us
