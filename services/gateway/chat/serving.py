"""One chat completion through the services, stage by stage:

    input rails -> retrieval -> retrieval rails -> prompt -> generation -> output rails

`prepare` turns the request into its options once and runs every stage before generation
(raising the HTTP errors a client should see before any byte of a stream); `complete` and
`stream` generate, run the stages after generation and answer in OpenAI's format. Each stage
is a module of chat/stages and decides itself whether it has anything to do; every call to a
service gets what is left of the request's deadline.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator

from fastapi import Request
from fastapi.responses import StreamingResponse

from services.gateway.chat import metrics, responses
from services.gateway.chat.conversation import turns_of
from services.gateway.chat.protocol import ChatCompletion, ChatCompletionRequest, GuardrailsReport
from services.gateway.chat.stages import Stage
from services.gateway.chat.stages.answer import Answerers, DecideAbstention
from services.gateway.chat.stages.evidence import EvidencePrompt, SelectEvidence, load_reader
from services.gateway.chat.stages.generate import Generate
from services.gateway.chat.stages.rails import InputRails, OutputRails, RetrievalRails
from services.gateway.chat.stages.retrieve import Retrieve
from services.gateway.chat.state import Answer, ChatOptions, ChatState, Deadline, model_id
from services.gateway.http.clients import Services
from services.gateway.http.disconnect import ClientDisconnected, cancel_on_disconnect
from services.gateway.settings import GatewaySettings
from shared.errors import RagrailError

log = logging.getLogger("ragrail.gateway")


class ChatServing:
    def __init__(self, services: Services, settings: GatewaySettings) -> None:
        self.services = services
        self.settings = settings
        # In order; a question the input rails block skips the rest.
        self.before_generation: list[Stage] = [
            InputRails(services, settings),
            Retrieve(services, settings),
            RetrievalRails(services, settings),
            SelectEvidence(services, settings, load_reader(settings)),
            DecideAbstention(services, settings),
            EvidencePrompt(services, settings),
        ]
        self.generate = Generate(services)
        # Abstain, extract or generate (grounded or not): stages/answer.py.
        self.answerers = Answerers(self.generate, settings)
        self.after_generation: list[Stage] = [
            OutputRails(services, settings),
        ]

    async def prepare(self, req: ChatCompletionRequest) -> ChatState:
        started = time.perf_counter()
        # Cached by the client; asked again after a reconnect or a model change (a reload).
        info = await self.services.generator.info()
        options = ChatOptions.of(
            req,
            self.settings,
            reranker=self.services.reranker is not None,
            guardrails=self.services.guardrails is not None,
            generator=info,
        )
        deadline = Deadline(self.settings.generation_timeout_s)
        chat = ChatState(
            id=f"chatcmpl-{uuid.uuid4().hex[:24]}",
            created=int(time.time()),
            model=model_id(info),
            generator=info,
            options=options,
            turns=turns_of(req.messages),
            deadline=deadline,
            started=started,
            report=GuardrailsReport(enabled=options.rails),
        )
        if self.services.guardrails is None:
            chat.warnings.append("no guardrails service is configured: answered without rails")
        elif not options.rails:
            chat.warnings.append("guardrails switched off by the request")
        elif pending := await self.services.guardrails.guard_model_pending():
            chat.warnings.append(f"guardrails: the guard model's rails are {pending}")
        for stage in self.before_generation:
            if chat.blocked:
                break
            await stage(chat)
        return chat

    async def _after_generation(self, chat: ChatState) -> None:
        for stage in self.after_generation:
            await stage(chat)

    def _refuse(self, chat: ChatState) -> None:
        chat.answer = Answer(chat.withheld or self.settings.chat_refusal, "content_filter")

    def _finish(self, chat: ChatState) -> ChatCompletion:
        chat.timings.total_ms = chat.ms_since(chat.started)
        metrics.record(chat, self.settings.debug_log_prompts)
        return responses.completion(chat)

    async def complete(self, chat: ChatState) -> ChatCompletion:
        if chat.blocked:
            self._refuse(chat)
        else:
            await self.answerers.pick(chat).complete(chat)
            await self._after_generation(chat)
        return self._finish(chat)

    async def stream(self, chat: ChatState) -> AsyncIterator[str]:
        """Server-sent events in OpenAI's chunk format, ending with `data: [DONE]`. The first
        event is produced only once the generator has answered, so a generator that is down
        fails the request with a 503 before the stream starts. With output rails on, the
        answer is held back until they pass it (chat_stream_output_rails=buffer) or streamed
        as it comes and judged at the end (after)."""
        if chat.blocked:
            self._refuse(chat)
            yield responses.delta(chat, {"role": "assistant", "content": ""})
            assert chat.answer is not None
            yield responses.delta(chat, {"content": chat.answer.text})
            yield responses.final(chat, self._finish(chat))
            yield responses.DONE
            return
        hold = chat.options.rails and self.settings.chat_stream_output_rails == "buffer"
        deltas = self.answerers.pick(chat).stream(chat)
        first = True
        try:
            async for piece in deltas:
                if first:
                    yield responses.delta(chat, {"role": "assistant", "content": ""})
                    first = False
                if piece and not hold:
                    yield responses.delta(chat, {"content": piece})
        finally:
            await deltas.aclose()  # a client gone mid-stream cancels the generator call
        await self._after_generation(chat)
        assert chat.answer is not None
        if hold:
            yield responses.delta(chat, {"content": chat.answer.text})
        done = self._finish(chat)
        yield responses.final(chat, done)
        if chat.options.include_usage:
            yield responses.usage(chat, done)
        yield responses.DONE

    async def respond(
        self, body: ChatCompletionRequest, request: Request
    ) -> ChatCompletion | StreamingResponse:
        """The chat's HTTP answer: the completion, or its server-sent events. Until the answer
        (or its first event) is ready, a client that leaves cancels the work; a chat that ends
        without an answer (a failure, before or during the stream, or the client gone) is
        counted and logged here (metrics.chat_ended), once. vLLM keeps the same in its
        serving layer: the router only authorizes and hands the request on."""

        async def answer() -> ChatCompletion:
            return await self.complete(await self.prepare(body))

        async def start() -> tuple[ChatState, AsyncIterator[str], str]:
            prepared = await self.prepare(body)
            events = self.stream(prepared)
            # Errors before the first event are still HTTP errors.
            return prepared, events, await anext(events)

        # The generator's gRPC call is cancelled with the work; once streaming, Starlette
        # notices a client that leaves by itself.
        try:
            if not body.stream:
                return await cancel_on_disconnect(request, answer())
            prepared, events, first = await cancel_on_disconnect(request, start())
        except ClientDisconnected:
            metrics.chat_ended("cancelled", body.stream)
            raise
        except RagrailError as exc:
            if exc.http_status >= 500:
                metrics.chat_ended("error", body.stream, error=exc.message)
            raise
        except Exception as exc:
            metrics.chat_ended("error", body.stream, error=type(exc).__name__)
            raise

        async def sse() -> AsyncIterator[str]:
            try:
                yield first
                async for event in events:
                    yield event
            # A client that goes away cancels this task, or closes this generator at a yield
            # (neither is an Exception); closing `events` cancels the generator call.
            except (asyncio.CancelledError, GeneratorExit):
                metrics.chat_ended("cancelled", True, prepared.id)
                raise
            except Exception as exc:  # once streaming, a failure can only be reported in-stream
                message = getattr(exc, "message", None)
                if message is None:
                    log.exception("chat stream failed", extra={"id": prepared.id})
                    message = "internal error; see the gateway log"
                # HTTP 200 with an error event: counted and logged here, or nowhere.
                metrics.chat_ended("error", True, prepared.id, message)
                error = {"error": {"message": message, "type": type(exc).__name__}}
                yield f"data: {json.dumps(error)}\n\n"
            finally:
                await events.aclose()

        return StreamingResponse(
            sse(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
