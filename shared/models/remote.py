"""Talking to a remote model server (NIM, vLLM, trtllm-serve, Ollama, llama.cpp's server, TEI,
infinity): the settings every remote backend has, the API key, and one mapping of HTTP and
connection failures onto ragrail's errors.

The generator's `openai` engine, the embedder's `openai` backend and the reranker's remote
backends all build a `RemoteServer` from their settings (a `RemoteServerSettings` mixed into
the service's settings class, so the variables are RAGRAIL_<SERVICE>_REMOTE_*), and send every
request through it. Its rules:

- The API key is read from RAGRAIL_<SERVICE>_REMOTE_API_KEY or the file REMOTE_API_KEY_FILE
  names (a container secret), sent as a bearer token, and never logged or put in an error.
- A failure becomes the error a client can act on, naming the server and the setting to fix:
  unreachable or 5xx -> `Unavailable` (503), a refused key -> `Unavailable` saying so, a
  rejected request -> `InvalidArgument`, the server's own overload (429) -> `ResourceExhausted`,
  a timeout -> `DeadlineExceeded`.
- Retries are for idempotent requests only (embeddings, ranking, model listing, tokenizing),
  with a doubling backoff, within the caller's deadline. A generation is retried only before
  its first token, and that decision belongs to the engine, not here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, Field, SecretStr

from shared.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    RagrailError,
    ResourceExhausted,
    Unavailable,
)
from shared.settings import retries_field, retry_backoff_field, timeout_field

T = TypeVar("T")


class RemoteServerSettings(BaseModel):
    """The remote_* settings of a service that can serve through a model server; mixed into
    the service's settings class after its own base, so they read RAGRAIL_<SERVICE>_REMOTE_*."""

    remote_url: str = Field(
        "",
        description="Base URL of the model server's API as its documentation gives it, e.g. "
        "http://127.0.0.1:8000/v1 (vLLM, NIM, llama.cpp's server, Ollama's /v1) or "
        "http://127.0.0.1:8080 (TEI); only for the remote backends.",
    )
    remote_model: str = Field(
        "",
        description="The model name the server knows (the `model` field of each request); empty "
        "takes the first model the server's /models lists.",
    )
    remote_api_key: SecretStr = Field(
        SecretStr(""),
        description="API key sent as `Authorization: Bearer`; never logged. Prefer "
        "remote_api_key_file for a container secret.",
    )
    remote_api_key_file: str = Field(
        "", description="File holding the API key (its first line); overrides remote_api_key."
    )
    remote_headers: dict[str, str] = Field(
        default_factory=dict,
        description="Extra HTTP headers for every request, as JSON in the environment, e.g. "
        '{"NVCF-FUNCTION-ID": "..."}; values are never logged.',
    )
    remote_timeout_s: float = timeout_field(
        30.0, "Limit for connecting and for each request without a deadline of its own."
    )
    remote_retries: int = retries_field(
        "Retries of a request the server could not be reached for or answered with a 5xx/429, "
        "only where repeating it is safe, within the request's deadline."
    )
    remote_retry_backoff_s: float = retry_backoff_field(
        "Wait before the first retry; doubles on each one."
    )


def remote_batch_size_field(description: str) -> Any:
    """`remote_batch_size` of a backend that splits a call's inputs into requests to the
    server (the embedder's texts, the reranker's passages): 64, at most 4096."""
    return Field(64, ge=1, le=4096, description=description)


class RemoteServer:
    """One model server as a service's remote backend sees it: URL, auth headers, clients, and
    the error mapping. `service` names the settings in messages (RAGRAIL_<SERVICE>_...)."""

    def __init__(self, settings: RemoteServerSettings, service: str, section: str = "") -> None:
        self.service = service
        # Where the settings are read from, for messages: a service's RAGRAIL_<SERVICE>_*
        # variables, or a YAML section (`section`, e.g. a guardrails rail's custom_data).
        self.section = section
        if not settings.remote_url:
            raise FailedPrecondition(
                f"the {service}'s remote backend needs {self.setting('remote_url')}, the "
                "model server's base URL (e.g. http://127.0.0.1:8000/v1); see "
                "docs/model-servers.md"
            )
        if not settings.remote_url.startswith(("http://", "https://")):
            raise FailedPrecondition(
                f"{self.setting('remote_url')}={settings.remote_url!r} is not an http(s) URL"
            )
        self.base_url = settings.remote_url.rstrip("/")
        self.model = settings.remote_model
        self.timeout_s = settings.remote_timeout_s
        self.retries = settings.remote_retries
        self.backoff_s = settings.remote_retry_backoff_s
        self.headers = dict(settings.remote_headers)
        key = self._api_key(settings)
        if key:
            self.headers["Authorization"] = f"Bearer {key}"

    def _api_key(self, settings: RemoteServerSettings) -> str:
        if settings.remote_api_key_file:
            path = Path(settings.remote_api_key_file)
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise FailedPrecondition(
                    f"{self.setting('remote_api_key_file')}={path} cannot be read "
                    f"({exc.strerror}); point it at the file holding the key"
                ) from exc
            return lines[0].strip() if lines else ""
        return settings.remote_api_key.get_secret_value().strip()

    def setting(self, name: str) -> str:
        """How a person sets `name` (a RemoteServerSettings field): RAGRAIL_<SERVICE>_<NAME>,
        or <section>.<name> for settings read from a YAML section."""
        if self.section:
            return f"{self.section}.{name}"
        return f"RAGRAIL_{self.service.upper()}_{name.upper()}"

    def url(self, path: str) -> str:
        """`path` under the base URL; an absolute path ("/rerank") replaces the base's path."""
        if path.startswith("/"):
            return str(httpx.URL(self.base_url).copy_with(path=path))
        return f"{self.base_url}/{path}"

    def __repr__(self) -> str:  # the key stays out of every log line and repr
        return f"RemoteServer({self.base_url!r}, model={self.model!r})"

    # Clients. A backend keeps one for its lifetime (connection reuse matters for throughput).

    def timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0))

    def sync_client(self) -> httpx.Client:
        return httpx.Client(headers=self.headers, timeout=self.timeout())

    def async_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers=self.headers, timeout=self.timeout())

    # Errors.

    def error_for(self, exc: Exception, what: str) -> RagrailError:
        """The error for a failed request; `what` says what was asked ("embeddings of 32
        texts"). Never includes the API key (only the URL and the server's own message)."""
        where = f"the {self.service}'s model server at {self.base_url}"
        if isinstance(exc, RagrailError):
            return exc
        if isinstance(exc, httpx.TimeoutException):
            return DeadlineExceeded(
                f"{where} did not answer {what} in time ({type(exc).__name__}); raise the "
                f"deadline or {self.setting('remote_timeout_s')}, or check the server's load"
            )
        if isinstance(exc, httpx.HTTPStatusError):
            return self._status_error(exc.response, where, what)
        if isinstance(exc, httpx.TransportError):
            return Unavailable(
                f"{where} cannot be reached for {what} ({type(exc).__name__}: {exc}); start it, "
                f"or fix {self.setting('remote_url')}"
            )
        return Unavailable(f"{where} failed on {what}: {type(exc).__name__}: {exc}")

    def _status_error(self, response: httpx.Response, where: str, what: str) -> RagrailError:
        status = response.status_code
        detail = server_message(response)
        said = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
        if status in (401, 403):
            return Unavailable(
                f"{where} refused the API key for {what} ({said}); set "
                f"{self.setting('remote_api_key')} or {self.setting('remote_api_key_file')} "
                "to a key it accepts"
            )
        if status == 404:
            return FailedPrecondition(
                f"{where} has no {response.request.url.path} or no model "
                f"{self.model or '(first listed)'} ({said}); check {self.setting('remote_url')} "
                f"(the API's base, often ending in /v1) and {self.setting('remote_model')}"
            )
        if status == 429:
            return ResourceExhausted(f"{where} is overloaded ({said}); retry later")
        if 400 <= status < 500:
            return InvalidArgument(f"{where} rejected {what} ({said})")
        return Unavailable(f"{where} failed on {what} ({said})")

    @staticmethod
    def retryable(exc: Exception) -> bool:
        """Whether repeating an idempotent request may succeed: not reached, 5xx or 429."""
        if isinstance(exc, httpx.HTTPStatusError):
            return exc.response.status_code >= 500 or exc.response.status_code == 429
        return isinstance(exc, httpx.TransportError) and not isinstance(
            exc, httpx.ReadTimeout | httpx.WriteTimeout
        )

    # Idempotent requests, retried.

    def call(self, send: Callable[[], T], what: str, deadline: float | None = None) -> T:
        """`send()` (a request on a sync client that raises for its status), retried where safe
        within `deadline` (time.monotonic()); failures mapped by `error_for`."""
        attempt = 0
        while True:
            try:
                return send()
            except Exception as exc:  # mapped below
                wait = self._next_wait(exc, attempt, deadline)
                if wait is None:
                    raise self.error_for(exc, what) from exc
                attempt += 1
                time.sleep(wait)

    async def acall(
        self, send: Callable[[], Awaitable[T]], what: str, deadline: float | None = None
    ) -> T:
        """`call` for an async client."""
        attempt = 0
        while True:
            try:
                return await send()
            except Exception as exc:  # mapped below
                wait = self._next_wait(exc, attempt, deadline)
                if wait is None:
                    raise self.error_for(exc, what) from exc
                attempt += 1
                await asyncio.sleep(wait)

    def first_model(self, client: httpx.Client) -> str:
        """REMOTE_MODEL, else the first model the server's /models lists (OpenAI's {"data":
        [{"id"}]}); a server that lists none needs REMOTE_MODEL set."""
        if self.model:
            return self.model

        def send() -> Any:
            response = client.get(self.url("models"))
            response.raise_for_status()
            return response.json()

        return self.first_listed_model(self.call(send, "its model list (/models)"))

    def first_listed_model(self, body: Any, error: type[RagrailError] = FailedPrecondition) -> str:
        """The first model id of a /models reply (OpenAI's {"data": [{"id"}]}); `error` naming
        REMOTE_MODEL when it lists none."""
        data = body.get("data") if isinstance(body, dict) else None
        if not data or not isinstance(data[0], dict) or not data[0].get("id"):
            raise error(
                f"the {self.service}'s model server at {self.base_url} lists no model at "
                f"/models; set {self.setting('remote_model')} to the model it serves"
            )
        return str(data[0]["id"])

    def _next_wait(self, exc: Exception, attempt: int, deadline: float | None) -> float | None:
        if not self.retryable(exc):
            return None
        return retry_wait(attempt, self.retries, self.backoff_s, deadline)


def retry_wait(
    attempt: int, retries: int, backoff_s: float, deadline: float | None
) -> float | None:
    """The one retry rule: how long to wait before try `attempt + 1` (exponential from
    `backoff_s`), or None when `retries` are spent or the wait would pass `deadline`
    (time.monotonic())."""
    if attempt >= retries:
        return None
    wait = backoff_s * 2**attempt
    if deadline is not None and time.monotonic() + wait >= deadline:
        return None
    return wait


def server_message(response: httpx.Response, limit: int = 300) -> str:
    """The error message a server put in its body (OpenAI's {"error": {"message"}}, FastAPI's
    {"detail"}, TEI's {"error"}), or its text, cut to `limit` characters."""
    try:
        body: Any = response.json()
    except (ValueError, httpx.ResponseNotRead):
        try:
            return response.text[:limit].strip()
        except httpx.ResponseNotRead:
            return ""
    if isinstance(body, dict):
        for key in ("error", "detail", "message"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message") or value
            if value:
                return str(value)[:limit]
    return str(body)[:limit]
