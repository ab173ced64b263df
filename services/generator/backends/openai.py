"""openai engine: the answer comes from any server that speaks OpenAI's HTTP API (NIM, vLLM,
trtllm-serve, TGI, Ollama's /v1, llama.cpp's `llama-server`, llama-cpp-python's server);
this process validates, counts tokens and streams, as for the other engines.

Each request is one streamed (SSE) POST: `/chat/completions` with the messages when the
server applies the chat template (remote_chat_template=server, the default), or
`/completions` with the prompt rendered here by `tokenizer`'s template (local). What the
engine adds around it:

- Cancellation: when the servicer closes the iterator (client gone, deadline, stop string),
  the HTTP response is closed, which closes the connection; the server sees the client leave
  and frees the request's slot (tested against llama-cpp-python's single-slot server).
- Deadlines: the time left is the request's timeout; without one, remote_timeout_s bounds
  connecting and each wait for the next piece.
- Retries: only while nothing has been streamed to the client (the server could not be
  reached, answered 5xx or 429, or dropped the stream before its first piece), with a
  doubling backoff within the deadline; after that a failure ends the answer.
- Errors: `shared.models.remote.RemoteServer` maps them (UNAVAILABLE naming the URL for a
  server that is down or refused the key, DEADLINE_EXCEEDED, INVALID_ARGUMENT...).
- Token counts: the `tokenizer` setting when given (no round trip, and llama-cpp-python's
  server would serialise its tokenize endpoint behind running answers); otherwise the
  server's tokenize endpoint (vLLM's and llama.cpp's /tokenize, llama-cpp-python's
  /extras/tokenize). With the server's chat template, a chat's prompt is counted by the server
  (vLLM's /tokenize with messages, llama.cpp's /apply-template) or with `tokenizer`'s copy of
  the template; when nothing can count exactly the service refuses to start rather than guess.
- Usage: each streamed piece counts one token (llama.cpp's servers and vLLM stream a token per
  piece); when the server reports usage (stream_options.include_usage) the last chunk makes
  the sum equal to its completion_tokens.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import httpx

from services.generator import metrics
from services.generator.backends.base import (
    Chunk,
    Engine,
    EngineInfo,
    GenerationRequest,
    Message,
    Sampling,
)
from services.generator.backends.openai_stream import StreamError, StreamReader, read_sse
from services.generator.backends.openai_tokenize import PROBE_TEXT, ROUTES, TokenizeRoute
from services.generator.chat_template import ChatTokenizer, load_chat_tokenizer
from services.generator.settings import GeneratorSettings
from shared.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    RagrailError,
    Unavailable,
)
from shared.models.remote import RemoteServer

log = logging.getLogger(__name__)


class OpenAIEngine(Engine):
    name: ClassVar[str] = "openai"

    def __init__(self, settings: GeneratorSettings) -> None:
        self.settings = settings
        self.server = RemoteServer(settings, "generator")
        self.template = settings.remote_chat_template
        self.tokenizer: ChatTokenizer | None = (
            load_chat_tokenizer(settings.tokenizer) if settings.tokenizer else None
        )
        self.model = settings.remote_model
        # Set explicitly (environment, YAML): the override; otherwise the server's figure.
        explicit = "context_length" in settings.model_fields_set and settings.context_length > 0
        self.context_length = settings.context_length if explicit else 0
        self.context_source = "RAGRAIL_GENERATOR_CONTEXT_LENGTH" if explicit else ""
        self.route: TokenizeRoute | None = None
        self._prefix: list[int] = []  # what the route adds to every text (a BOS), cut off
        self._sync = self.server.sync_client()  # tokenize runs on worker threads
        self._client: httpx.AsyncClient | None = None
        self._probe_lock = threading.Lock()
        self._probed = False
        self._running = 0

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._client = self.server.async_client()
        known = bool(self.model and self.context_length)
        try:
            await self._discover(wait=not known)
        except Unavailable as exc:
            if not known:
                raise Unavailable(
                    f"{exc.message}. The generator needs the server's model name and context "
                    "length before it serves: start the server first, or set "
                    "RAGRAIL_GENERATOR_REMOTE_MODEL and RAGRAIL_GENERATOR_CONTEXT_LENGTH"
                ) from exc
            # Both are known: serve anyway, each request says UNAVAILABLE until it is back.
            log.warning(
                "model server not reachable yet",
                extra={"url": self.server.base_url, "error": exc.message},
            )
            return
        if self.tokenizer is None:
            await asyncio.to_thread(self._probe)
            if self.route is None:
                raise FailedPrecondition(
                    f"the model server at {self.server.base_url} has no tokenize endpoint "
                    "(tried /tokenize and /extras/tokenize), so tokens cannot be counted; set "
                    "RAGRAIL_GENERATOR_TOKENIZER to the served model's tokenizer (a Hugging "
                    "Face directory or a .gguf file)"
                )
            if self.template == "server" and self.route.name == "llama-cpp-python":
                raise FailedPrecondition(
                    f"the model server at {self.server.base_url} (llama-cpp-python) cannot "
                    "count a chat with its own template; set RAGRAIL_GENERATOR_TOKENIZER to the "
                    "served model's tokenizer (its .gguf file or Hugging Face directory)"
                )
        log.info(
            "model server ready",
            extra={
                "url": self.server.base_url,
                "model": self.model,
                "context_length": self.context_length,
                "tokens": self._counter(),
            },
        )

    async def _discover(self, wait: bool) -> None:
        """The model name and context length from the server's /models (and llama.cpp's
        /props). With `wait`, a server not reachable yet is tried for remote_timeout_s."""
        assert self._client is not None
        until = time.monotonic() + (self.server.timeout_s if wait else 0)
        while True:
            try:
                listed = await _json(self._client.get(self.server.url("models")))
                break
            except httpx.HTTPError as exc:
                if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code == 404:
                    listed = {}  # no /models: the settings must name the model
                    break
                if not RemoteServer.retryable(exc) or time.monotonic() >= until:
                    raise self.server.error_for(exc, "the model list") from exc
                await asyncio.sleep(1.0)
        models = [m for m in listed.get("data", []) if isinstance(m, dict)] if listed else []
        ids = [str(m.get("id")) for m in models]
        if not self.model:
            if not ids:
                raise FailedPrecondition(
                    f"the model server at {self.server.base_url} lists no model at /models; "
                    "set RAGRAIL_GENERATOR_REMOTE_MODEL to the name it serves"
                )
            self.model = ids[0]
        elif ids and self.model not in ids:
            raise FailedPrecondition(
                f"the model server at {self.server.base_url} does not serve "
                f"RAGRAIL_GENERATOR_REMOTE_MODEL={self.model!r}; it lists {', '.join(ids[:10])}"
            )
        entry = next((m for m in models if str(m.get("id")) == self.model), {})
        served, source = await self._served_context(entry)
        if self.context_length:
            if served and self.context_length > served:
                log.warning(
                    "RAGRAIL_GENERATOR_CONTEXT_LENGTH exceeds the server's context window",
                    extra={"setting": self.context_length, "server": served, "source": source},
                )
            return
        if not served:
            raise FailedPrecondition(
                f"the model server at {self.server.base_url} does not report the context "
                f"length of {self.model!r}; set RAGRAIL_GENERATOR_CONTEXT_LENGTH to the "
                "server's (llama-cpp-python: its --n_ctx; vLLM: --max-model-len)"
            )
        self.context_length, self.context_source = served, source

    async def _served_context(self, entry: dict[str, Any]) -> tuple[int, str]:
        """The context window a /models entry reports: vLLM's max_model_len, a
        `context_length` (LM Studio, OpenRouter), or llama.cpp's (its /props n_ctx, the
        window a request gets, before meta.n_ctx_train, the model's training context)."""
        for key in ("max_model_len", "context_length"):
            if isinstance(entry.get(key), int) and entry[key] > 0:
                return int(entry[key]), f"/models {key}"
        meta = entry.get("meta")
        if not isinstance(meta, dict):
            return 0, ""
        assert self._client is not None
        try:
            props = await _json(self._client.get(self.server.url("/props")))
            settings = props.get("default_generation_settings", {})
            n_ctx = settings.get("n_ctx") or props.get("n_ctx")
            if isinstance(n_ctx, int) and n_ctx > 0:
                return n_ctx, "/props n_ctx"
        except (httpx.HTTPError, ValueError, AttributeError):
            pass
        train = meta.get("n_ctx_train")
        return (int(train), "/models meta.n_ctx_train") if isinstance(train, int) else (0, "")

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        self._sync.close()

    def info(self) -> EngineInfo:
        details = {
            "remote_url": self.server.base_url,
            "remote_model": self.model,
            "chat_template": self.template,
            "tokens_counted_by": self._counter(),
            "context_length_from": self.context_source,
            "running": str(self._running),
            "waiting": "0",  # the server queues; its own metrics say how long
        }
        return EngineInfo(
            engine=self.name,
            model=f"{self.model}@{self.server.base_url}",
            context_length=self.context_length,
            details=details,
        )

    def _counter(self) -> str:
        if self.tokenizer is not None:
            return self.tokenizer.source
        return f"server {self.route.path} ({self.route.name})" if self.route else "server"

    # -- tokens ---------------------------------------------------------------------------

    def _probe(self) -> None:
        """Finds the server's tokenize endpoint, once (blocking)."""
        with self._probe_lock:
            if self._probed:
                return
            for route in ROUTES:
                try:
                    reply = self._post(route.path, route.body(self.model, PROBE_TEXT, False))
                except (FailedPrecondition, InvalidArgument):
                    continue  # not there (404), or not this shape (400, 422)
                if route.accepts(reply):
                    empty = self._post(route.path, route.body(self.model, "", False))
                    self.route, self._prefix = route, list(empty.get("tokens") or [])
                    break
            # Settled only by answers: a server that could not be reached is asked again.
            self._probed = True

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        what = f"tokenizing at {path}"
        return self.server.call(lambda: _sync_json(self._sync, self.server.url(path), body), what)

    def _remote_tokens(self, text: str, chat: bool) -> list[int]:
        self._probe()
        if self.route is None:
            raise FailedPrecondition(
                f"the model server at {self.server.base_url} has no tokenize endpoint; set "
                "RAGRAIL_GENERATOR_TOKENIZER to the served model's tokenizer"
            )
        reply = self._post(self.route.path, self.route.body(self.model, text, chat))
        tokens = [int(t) for t in reply.get("tokens", [])]
        n = len(self._prefix)
        return tokens[n:] if n and tokens[:n] == self._prefix else tokens

    def tokenize(self, text: str, *, chat: bool) -> list[int]:
        if self.tokenizer is not None:
            return self.tokenizer.encode(text, chat=chat)
        return self._remote_tokens(text, chat)

    def render_chat(self, messages: list[Message]) -> str:
        if self.tokenizer is not None:
            return self.tokenizer.render(messages)
        self._probe()
        if self.route is not None and self.route.name == "llama.cpp":
            body = {"messages": _messages(messages)}
            reply = self._post("/apply-template", body)
            return str(reply.get("prompt", ""))
        raise FailedPrecondition(
            f"the chat template of the model at {self.server.base_url} is not available here; "
            "set RAGRAIL_GENERATOR_TOKENIZER to the served model's tokenizer"
        )

    def prepare(self, messages: list[Message]) -> tuple[str, list[int]]:
        if self.tokenizer is None and self.template == "server":
            self._probe()
            if self.route is not None and self.route.name == "vllm":
                # vLLM applies the served model's template and counts in one call.
                body = {
                    "model": self.model,
                    "messages": _messages(messages),
                    "add_generation_prompt": True,
                    "add_special_tokens": False,
                }
                reply = self._post(self.route.path, body)
                return "", [int(t) for t in reply.get("tokens", [])]
        return super().prepare(messages)

    # -- generation -----------------------------------------------------------------------

    def _body(self, request: GenerationRequest) -> tuple[str, dict[str, Any]]:
        """(path, JSON body) of the streamed request."""
        s: Sampling = request.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
        }
        if s.stop:
            body["stop"] = list(s.stop)
        if s.seed is not None:
            body["seed"] = s.seed
        if self.settings.remote_sampling_extras:
            # llama.cpp reads top_k 0 as off and min_p 0 as off; vLLM reads 0 as off too.
            body.update(
                top_k=s.top_k,
                min_p=0.0,
                repetition_penalty=s.repetition_penalty,
                repeat_penalty=s.repetition_penalty,
            )
        elif s.top_k or s.repetition_penalty != 1.0:
            field = "sampling.top_k" if s.top_k else "sampling.repetition_penalty"
            raise InvalidArgument(
                f"{field} cannot be sent to the model server at {self.server.base_url}: "
                "RAGRAIL_GENERATOR_REMOTE_SAMPLING_EXTRAS is false; leave it unset"
            )
        if self.template == "server" and request.messages:
            body["messages"] = _messages(list(request.messages))
            return "chat/completions", body
        body["prompt"] = request.prompt
        return "completions", body

    def _timeout(self, deadline: float | None) -> httpx.Timeout:
        limit = self.server.timeout_s
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlineExceeded(
                    f"the deadline passed before the model server at {self.server.base_url} "
                    "was asked"
                )
            return httpx.Timeout(left, connect=min(left, limit, 10.0))
        return httpx.Timeout(limit, connect=min(limit, 10.0))

    async def _open(self, path: str, body: dict[str, Any], deadline: float | None) -> Any:
        assert self._client is not None
        request = self._client.build_request(
            "POST", self.server.url(path), json=body, timeout=self._timeout(deadline)
        )
        response = await self._client.send(request, stream=True)
        if response.status_code >= 400:
            try:
                await response.aread()
            finally:
                await response.aclose()
            response.raise_for_status()
        return response

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        path, body = self._body(request)
        deadline = request.deadline
        self._running += 1
        metrics.RUNNING.labels(self.name).set(self._running)
        attempt = 0
        sent = False  # text went to the client: no retry after that
        complete = False
        try:
            while True:
                response = None
                stream = StreamReader()
                try:
                    response = await self._open(path, body, deadline)
                    async for event in read_sse(response):
                        for chunk in stream.feed(event):
                            sent = True
                            yield chunk
                        if deadline is not None and time.monotonic() >= deadline:
                            raise DeadlineExceeded(
                                f"the deadline passed while the model server at "
                                f"{self.server.base_url} was answering"
                            )
                    final = stream.end()
                    if final is None:
                        raise Unavailable(
                            f"the model server at {self.server.base_url} ended the answer "
                            "without a finish reason (llama-cpp-python's server does so when "
                            "another request interrupts it: start it with "
                            "--interrupt_requests false)"
                        )
                    complete = True
                    yield final
                    return
                except (httpx.HTTPError, StreamError) as exc:
                    error = self._error(exc, deadline)
                    wait = self.server.backoff_s * 2**attempt
                    if (
                        sent
                        or not RemoteServer.retryable(exc)
                        or attempt >= self.server.retries
                        or (deadline is not None and time.monotonic() + wait >= deadline)
                    ):
                        raise error from exc
                finally:
                    if response is not None:
                        # Closing mid-answer drops the connection; the server stops the
                        # request and frees its slot.
                        await response.aclose()
                attempt += 1
                log.info(
                    "model server unreachable; retrying",
                    extra={"attempt": attempt, "wait_s": wait, "request_id": request.request_id},
                )
                await asyncio.sleep(wait)
        except (GeneratorExit, asyncio.CancelledError):
            if not complete:  # the client went away, the deadline passed or a stop matched
                metrics.CANCELLED.labels(self.name).inc()
            raise
        finally:
            self._running -= 1
            metrics.RUNNING.labels(self.name).set(self._running)

    def _error(self, exc: Exception, deadline: float | None) -> RagrailError:
        if isinstance(exc, StreamError):
            return Unavailable(
                f"the model server at {self.server.base_url} failed mid-answer: {exc}"
            )
        if (
            isinstance(exc, httpx.TimeoutException)
            and deadline is not None
            and time.monotonic() >= deadline - 0.05
        ):
            return DeadlineExceeded(
                f"the deadline passed while waiting for the model server at {self.server.base_url}"
            )
        return self.server.error_for(exc, "a generation")


def _messages(messages: list[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


async def _json(pending: Any) -> Any:
    """The JSON body of an awaited response, raising for its status."""
    response: httpx.Response = await pending
    response.raise_for_status()
    return response.json()


def _sync_json(client: httpx.Client, url: str, body: dict[str, Any]) -> Any:
    response = client.post(url, json=body)
    response.raise_for_status()
    return response.json()
