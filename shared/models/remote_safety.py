"""An LLM safety model (NemoGuard content safety, Llama Guard 3) behind an OpenAI-compatible
server (NIM, vLLM, llama.cpp's server): one judgement per call, in the model's published
format (safety_formats.py), through RemoteServer (key, error mapping, retries).

A judgement is a classification: repeating it is safe, so a server that could not be reached
or answered 5xx/429 is asked again (remote_retries), all within one deadline per call
(remote_timeout_s), after which the call raises `DeadlineExceeded`. Any failure raises a
`RagrailError` (the server's) or `UnreadableAnswer` (the model's answer); the caller decides
what a missing verdict means.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx

from shared.errors import DeadlineExceeded, Unavailable
from shared.models.remote import RemoteServer
from shared.models.safety_formats import (
    ENDPOINTS,
    Format,
    SafetyVerdict,
    Stage,
    parse,
    render,
)


@dataclass(frozen=True)
class Judgement:
    verdict: SafetyVerdict
    answer: str  # what the model said, for the report
    model: str
    ms: float


class RemoteSafetyModel:
    """Judges texts with the safety model `server` serves, in format `fmt`."""

    def __init__(
        self,
        server: RemoteServer,
        fmt: Format,
        categories: dict[str, str],
        max_tokens: int,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.server = server
        self.format = fmt
        self.categories = categories
        self.max_tokens = max_tokens
        # Fields merged into every request body (vLLM's guided decoding, NIM's nvext,
        # llama.cpp's grammar): what the server needs beyond OpenAI's fields.
        self.extra_body = dict(extra_body or {})
        self.endpoint = ENDPOINTS[fmt]
        self.model = server.model
        # One client per event loop: an httpx.AsyncClient's pool belongs to the loop that
        # first used it (the service's loop; a test's own).
        self._clients: dict[int, httpx.AsyncClient] = {}

    def _client(self) -> httpx.AsyncClient:
        loop = id(asyncio.get_running_loop())
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self.server.async_client()
        return client

    def body(self, prompt: str) -> dict[str, Any]:
        """The request body of one judgement (greedy: a verdict, not a sample)."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
            "stream": False,
        }
        if self.endpoint == "chat/completions":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        body.update(self.extra_body)
        return body

    async def judge(self, stage: Stage, text: str, question: str = "") -> Judgement:
        """The model's verdict on `text` (the user's message on input; on output, the answer
        to `question`)."""
        started = time.perf_counter()
        timeout = self.server.timeout_s
        prompt = render(self.format, stage, text, question, self.categories)
        what = f"a {self.format} safety judgement"
        try:
            async with asyncio.timeout(timeout):
                if not self.model:
                    self.model = await self._first_model()
                reply = await self.server.acall(
                    lambda: self._post(self.body(prompt)), what, time.monotonic() + timeout
                )
        except TimeoutError as exc:
            raise DeadlineExceeded(
                f"the {self.server.service}'s model server at {self.server.base_url} did not "
                f"answer {what} within {timeout:g} s; raise "
                f"{self.server.setting('remote_timeout_s')} or check the server's load"
            ) from exc
        answer = _answer_text(reply, self.endpoint)
        if answer is None:
            raise Unavailable(
                f"the {self.server.service}'s model server at {self.server.base_url} answered "
                f"{what} with no text ({str(reply)[:200]})"
            )
        ms = (time.perf_counter() - started) * 1000
        return Judgement(parse(self.format, stage, answer), answer, self.model, ms)

    async def _post(self, body: dict[str, Any]) -> Any:
        response = await self._client().post(self.server.url(self.endpoint), json=body)
        response.raise_for_status()
        return response.json()

    async def _first_model(self) -> str:
        async def send() -> Any:
            response = await self._client().get(self.server.url("models"))
            response.raise_for_status()
            return response.json()

        listed = await self.server.acall(send, "its model list (/models)")
        return self.server.first_listed_model(listed, Unavailable)

    async def close(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


def _answer_text(reply: Any, endpoint: str) -> str | None:
    """The first choice's text: `message.content` of a chat, `text` of a completion."""
    try:
        choice = reply["choices"][0]
        text = choice["message"]["content"] if endpoint == "chat/completions" else choice["text"]
    except (KeyError, IndexError, TypeError):
        return None
    return text if isinstance(text, str) else None
