"""The generation stage: the prompt to the generator, whole (`complete`) or as it comes
(`stream`), within what is left of the chat's deadline."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from opentelemetry import trace

from services.gateway.chat import metrics
from services.gateway.chat.state import Answer, ChatState, Prompt
from services.gateway.http.clients import Services
from shared.tracing import outgoing_metadata, tracer


class Generate:
    """Not a `Stage`: it runs one of two ways, and times itself (a stream's span cannot be
    made current across its yields)."""

    name = "generation"

    def __init__(self, services: Services) -> None:
        self.services = services

    def _prompt(self, chat: ChatState) -> Prompt:
        assert chat.prompt is not None
        return chat.prompt

    def _done(self, chat: ChatState, start: float) -> None:
        chat.timings.generation_ms = chat.ms_since(start)
        metrics.STAGE_SECONDS.labels(self.name).observe(chat.timings.generation_ms / 1000)

    async def complete(self, chat: ChatState) -> None:
        """The whole answer in one call."""
        start = time.perf_counter()
        with tracer.start_as_current_span(f"chat.{self.name}"):
            result = await self.services.generator.generate(
                self._prompt(chat).messages,
                chat.options.sampling,
                request_id=chat.id,
                timeout_s=chat.deadline.left(),
            )
        self._done(chat, start)
        chat.timings.ttft_ms = round(result.time_to_first_token_ms, 2)
        chat.answer = Answer(
            result.text,
            result.finish_reason,
            result.usage.prompt_tokens,
            result.usage.completion_tokens,
        )

    async def stream(self, chat: ChatState) -> AsyncIterator[str]:
        """The answer's pieces as the generator produces them; chat.answer once it ends.
        Closing this iterator (a client gone mid-stream) cancels the generator call."""
        start = time.perf_counter()
        # Made current only to take its traceparent: this generator's later steps run in the
        # response's context, where a span made current here could not be detached.
        span = tracer.start_span(f"chat.{self.name}")
        with trace.use_span(span, end_on_exit=False):
            metadata = outgoing_metadata()
        chunks = self.services.generator.stream(
            self._prompt(chat).messages,
            chat.options.sampling,
            request_id=chat.id,
            timeout_s=chat.deadline.left(),
            metadata=metadata,
        )
        parts: list[str] = []
        answer = Answer("", "stop")
        first = True
        try:
            async for chunk in chunks:
                if first:
                    chat.timings.ttft_ms = chat.ms_since(start)
                    first = False
                if chunk.delta:
                    parts.append(chunk.delta)
                yield chunk.delta
                if chunk.usage is not None:
                    answer.finish_reason = chunk.finish_reason or "stop"
                    answer.prompt_tokens = chunk.usage.prompt_tokens
                    answer.completion_tokens = chunk.usage.completion_tokens
        finally:
            await chunks.aclose()
            span.end()
        self._done(chat, start)
        answer.text = "".join(parts)
        chat.answer = answer
