"""`ragrail_generator`: ragrail's generator service as NeMo Guardrails' LLM, so the LLM rails
(`self check input`, `self check output`) run on the model the suite already serves.

NeMo Guardrails 0.24 builds its LLMs through its default framework from the config's
`models` entries; a provider registered under a name (`register_provider`, which the older
`register_llm_provider` also reaches) is any class implementing its `LLMModel` protocol
(`generate_async`, `stream_async`, `model_name`, `provider_name`, `provider_url`). Here that
class calls the generator's gRPC `Generate` with a deadline:

    models:
      - type: main
        engine: ragrail_generator
        model: default                 # a label: the generator serves the model it loaded
        parameters:
          url: 127.0.0.1:50055         # the generator's gRPC address
          timeout_s: 20                # deadline of each call
          max_tokens: 8                # cap on the answer (a self check needs a word)

A call that fails (generator down, deadline passed, an error status) raises
`GeneratorLLMError` with a message naming the generator and what happened; NeMo Guardrails
passes it on (as LLMCallException, out of `generate_async`), and the service blocks the check
with that message as the reason, naming the rail that called the LLM (engine.py). Nothing is
retried beyond the client's own reconnect on UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PROVIDER = "ragrail_generator"
DEFAULT_URL = "127.0.0.1:50055"

# The LLM failures of the check in progress (set per check by the engine): the rail that
# called the LLM is stopped by NeMo Guardrails with a generic internal error, and this is
# how the check learns why.
_failures: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar(
    "ragrail_llm_failures", default=None
)


class GeneratorLLMError(RuntimeError):
    """The generator could not answer an LLM rail's call."""


@contextlib.contextmanager
def recording_failures(failures: list[tuple[str, str]]) -> Iterator[list[tuple[str, str]]]:
    """Appends (task, message) to `failures` for every LLM call that fails in this block."""
    token = _failures.set(failures)
    try:
        yield failures
    finally:
        _failures.reset(token)


def _task() -> str:
    from nemoguardrails.context import llm_call_info_var

    info = llm_call_info_var.get()
    return str(getattr(info, "task", "") or "")


def _messages(prompt: Any) -> list[tuple[str, str]]:
    """(role, content) pairs from NeMo Guardrails' prompt: a string (one user message) or
    a list of its ChatMessage (or dicts)."""
    if isinstance(prompt, str):
        return [("user", prompt)]
    out = []
    for message in prompt or []:
        role = message.get("role") if isinstance(message, dict) else message.role
        content = message.get("content") if isinstance(message, dict) else message.content
        role = str(getattr(role, "value", role) or "user")
        if role not in ("system", "user", "assistant"):
            role = "user"
        if isinstance(content, list):  # multimodal parts: their text only
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        out.append((role, str(content or "")))
    return out


class GeneratorLLM:
    """NeMo Guardrails LLMModel on ragrail's generator (gRPC `Generate`)."""

    def __init__(
        self,
        model: str = "default",
        url: str = DEFAULT_URL,
        timeout_s: float = 20.0,
        max_tokens: int = 8,
        temperature: float = 0.0,
        **_: Any,
    ) -> None:
        if not url:
            raise ValueError(f"engine {PROVIDER}: parameters.url (the generator address) is empty")
        if float(timeout_s) <= 0:
            raise ValueError(f"engine {PROVIDER}: parameters.timeout_s must be positive")
        self._model = model
        self.url = url
        self.timeout_s = float(timeout_s)
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self._served = ""  # the model the generator says it answered with
        self._clients: dict[int, Any] = {}

    @property
    def model_name(self) -> str:
        return self._served or self._model

    @property
    def provider_name(self) -> str:
        return PROVIDER

    @property
    def provider_url(self) -> str:
        return self.url

    def _client(self) -> Any:
        # gRPC aio channels belong to the event loop that made them: one per loop.
        from shared.clients import ServiceClient
        from shared.proto.ragrail.v1 import generator_pb2_grpc

        loop = id(asyncio.get_running_loop())
        if loop not in self._clients:
            self._clients[loop] = ServiceClient(
                "generator",
                self.url,
                generator_pb2_grpc.GeneratorStub,
                timeout_s=self.timeout_s,
                connect_timeout_s=min(3.0, self.timeout_s),
            )
        return self._clients[loop]

    def _request(self, prompt: Any, stop: list[str] | None, kwargs: dict[str, Any]) -> Any:
        from shared.proto.ragrail.v1 import common_pb2, generator_pb2

        max_tokens = int(kwargs.get("max_tokens") or self.max_tokens)
        temperature = kwargs.get("temperature")
        return generator_pb2.GenerateRequest(
            messages=[common_pb2.ChatMessage(role=r, content=c) for r, c in _messages(prompt)],
            sampling=generator_pb2.SamplingParams(
                temperature=self.temperature if temperature is None else float(temperature),
                max_tokens=min(max_tokens, self.max_tokens),
                stop=[s for s in (stop or []) if s],
            ),
            request_id=f"guardrails-{_task() or 'llm'}-{uuid.uuid4().hex[:12]}",
        )

    async def generate_async(
        self, prompt: Any, *, stop: list[str] | None = None, **kwargs: Any
    ) -> Any:
        from nemoguardrails.types import LLMResponse, UsageInfo

        from shared.errors import RagrailError
        from shared.proto.ragrail.v1 import generator_pb2

        request = self._request(prompt, stop, kwargs)
        try:
            reply = await self._client().call("Generate", request, timeout_s=self.timeout_s)
        except (RagrailError, OSError, TimeoutError) as exc:
            message = (
                f"the LLM ({PROVIDER}, generator at {self.url}) did not answer: "
                f"{type(exc).__name__}: {exc}"
            )
            failures = _failures.get()
            if failures is not None:
                failures.append((_task(), message))
            log.error("LLM rail call failed", extra={"url": self.url, "error": message})
            raise GeneratorLLMError(message) from exc
        if reply.model:  # a packaged model's absolute path says no more than its file name
            self._served = Path(reply.model).name if reply.model.startswith("/") else reply.model
        finish = {
            generator_pb2.FINISH_REASON_STOP: "stop",
            generator_pb2.FINISH_REASON_LENGTH: "length",
        }.get(reply.finish_reason, "other")
        return LLMResponse(
            content=reply.text,
            model=reply.model or self._model,
            finish_reason=finish,  # type: ignore[arg-type]
            request_id=request.request_id,
            usage=UsageInfo(
                input_tokens=reply.usage.prompt_tokens,
                output_tokens=reply.usage.completion_tokens,
                total_tokens=reply.usage.prompt_tokens + reply.usage.completion_tokens,
            ),
        )

    async def stream_async(
        self, prompt: Any, *, stop: list[str] | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """One chunk with the whole answer: the rails read complete answers."""
        from nemoguardrails.types import LLMResponseChunk

        response = await self.generate_async(prompt, stop=stop, **kwargs)
        yield LLMResponseChunk(
            delta_content=response.content,
            model=response.model,
            finish_reason=response.finish_reason,
            request_id=response.request_id,
            usage=response.usage,
        )


def register() -> None:
    """Makes `engine: ragrail_generator` known to NeMo Guardrails (once per process)."""
    from nemoguardrails.llm.providers import get_provider_names, register_provider

    if PROVIDER not in get_provider_names():
        register_provider(PROVIDER, GeneratorLLM)
