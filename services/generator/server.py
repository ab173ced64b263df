"""Generator gRPC servicer: validation, chat template, stop strings, timing, usage, metrics.

Everything here is engine-independent (see services/generator/backends/base.py for the
split); the engine chosen by RAGRAIL_GENERATOR_ENGINE does the model work.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator

import grpc

from services.generator import metrics
from services.generator.backends import load_engine
from services.generator.backends.base import (
    Engine,
    EngineInfo,
    FinishReason,
    GenerationRequest,
    Message,
)
from services.generator.prompt_log import PromptLog
from services.generator.reload import install_reload
from services.generator.settings import GeneratorSettings
from services.generator.stops import StopMatcher
from services.generator.validation import fit_max_tokens, messages_of, sampling_of
from shared.errors import InvalidArgument, RagrailError
from shared.proto.ragrail.v1 import common_pb2, generator_pb2, generator_pb2_grpc
from shared.server import BlockingRunner, Built, ServiceSpec, request_id
from shared.version import VERSION

log = logging.getLogger(__name__)
MAX_COUNT_TEXTS = 4096
_FINISH = {
    FinishReason.STOP: generator_pb2.FINISH_REASON_STOP,
    FinishReason.LENGTH: generator_pb2.FINISH_REASON_LENGTH,
    FinishReason.CANCELLED: generator_pb2.FINISH_REASON_CANCELLED,
}


@dataclasses.dataclass
class Timer:
    """Time to first token and mean inter-token latency of one answer, from its arrival."""

    arrived: float
    first: float | None = None
    last: float | None = None
    tokens: int = 0

    def saw(self, tokens: int) -> None:
        if not tokens:
            return
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        self.last = now
        self.tokens += tokens

    def timing(self) -> generator_pb2.GenerationTiming:
        end = time.perf_counter()
        out = generator_pb2.GenerationTiming(total_ms=(end - self.arrived) * 1000)
        if self.first is not None:
            out.time_to_first_token_ms = (self.first - self.arrived) * 1000
        if self.first is not None and self.last is not None and self.tokens > 1:
            out.inter_token_latency_ms = (self.last - self.first) * 1000 / (self.tokens - 1)
        return out


@dataclasses.dataclass
class Totals:
    """Running figures Info reports, since the service started."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    itl_requests: int = 0

    def add(self, usage: generator_pb2.Usage, timing: generator_pb2.GenerationTiming) -> None:
        self.requests += 1
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.ttft_ms += timing.time_to_first_token_ms
        if usage.completion_tokens > 1:
            self.itl_ms += timing.inter_token_latency_ms
            self.itl_requests += 1

    def details(self) -> dict[str, str]:
        return {
            "requests_served": str(self.requests),
            "prompt_tokens_total": str(self.prompt_tokens),
            "completion_tokens_total": str(self.completion_tokens),
            "mean_time_to_first_token_ms": f"{self.ttft_ms / max(self.requests, 1):.1f}",
            "mean_inter_token_latency_ms": f"{self.itl_ms / max(self.itl_requests, 1):.2f}",
        }


class GeneratorServicer(generator_pb2_grpc.GeneratorServicer):
    def __init__(self, engine: Engine, settings: GeneratorSettings) -> None:
        self.engine = engine
        self.settings = settings
        self.info = engine.info()
        # Chat templates and tokenizers run here, off the event loop; the model runs on the
        # engine's own thread (or server).
        self._runner = BlockingRunner(settings.workers, "generator")
        self.totals = Totals()
        # Requests running per engine (by id): a switched-out engine closes when its are done.
        self._inflight: collections.Counter[int] = collections.Counter()
        self.prompt_log = PromptLog(settings.prompt_log_file) if settings.prompt_log_file else None

    def _prepare(
        self, messages: list[Message], engine: Engine | None = None
    ) -> tuple[str, list[int]]:
        return (engine or self.engine).prepare(messages)

    async def switch(self, engine: Engine) -> Engine:
        """Serve new requests with `engine` from now on; the old engine finishes the requests
        it is running, is closed, and is returned. No request fails or changes model midway:
        each request holds the engine it started on."""
        old = self.engine
        self.engine, self.info = engine, engine.info()
        while self._inflight[id(old)]:
            await asyncio.sleep(0.05)
        del self._inflight[id(old)]
        await old.close()
        return old

    async def _stream(
        self, request: generator_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[generator_pb2.GenerateChunk]:
        timer = Timer(time.perf_counter())
        model, info = self.engine, self.info  # this request's engine, even across a switch
        self._inflight[id(model)] += 1
        try:
            async for chunk in self._answer(request, context, timer, model, info):
                yield chunk
        finally:
            self._inflight[id(model)] -= 1

    async def _answer(
        self,
        request: generator_pb2.GenerateRequest,
        context: grpc.aio.ServicerContext,
        timer: Timer,
        model: Engine,
        info: EngineInfo,
    ) -> AsyncIterator[generator_pb2.GenerateChunk]:
        messages = messages_of(request.messages, self.settings, field="messages")
        sampling = sampling_of(request.sampling, self.settings)
        prompt, ids = await self._runner(self._prepare, messages, model)
        max_tokens = fit_max_tokens(sampling, len(ids), info.context_length, self.settings)
        sampling = dataclasses.replace(sampling, max_tokens=max_tokens)
        remaining = context.time_remaining()
        rid = request.request_id or request_id(context)
        if self.prompt_log is not None:
            await self._runner(self.prompt_log.write, rid, prompt)
        job = GenerationRequest(
            request_id=rid,
            prompt=prompt,
            prompt_ids=tuple(ids),
            sampling=sampling,
            deadline=time.monotonic() + remaining if remaining is not None else None,
            messages=tuple(messages),
        )
        matcher = StopMatcher(sampling.stop)
        finish: FinishReason | None = None
        tail = ""
        engine = info.engine
        try:
            async with contextlib.aclosing(model.generate(job)) as chunks:
                async for chunk in chunks:
                    timer.saw(chunk.tokens)
                    text, stopped = matcher.feed(chunk.text)
                    if stopped:
                        finish, tail = FinishReason.STOP, text
                        break
                    if chunk.finish_reason is not None:
                        finish, tail = chunk.finish_reason, text + matcher.flush()
                        break
                    if text:
                        yield generator_pb2.GenerateChunk(delta=text)
        except RagrailError as exc:
            metrics.REQUESTS.labels(engine, exc.grpc_code.name.lower()).inc()
            raise
        except asyncio.CancelledError:
            metrics.REQUESTS.labels(engine, "cancelled").inc()
            raise
        if finish is None:  # an engine broke the contract; say so rather than hang up quietly
            raise RagrailError(f"the {engine} engine ended an answer without a finish reason")
        usage = generator_pb2.Usage(prompt_tokens=len(ids), completion_tokens=timer.tokens)
        timing = timer.timing()
        self._record(usage, timing, finish)
        yield generator_pb2.GenerateChunk(
            delta=tail, finish_reason=_FINISH[finish], usage=usage, timing=timing
        )

    def _record(
        self,
        usage: generator_pb2.Usage,
        timing: generator_pb2.GenerationTiming,
        finish: FinishReason,
    ) -> None:
        engine = self.info.engine
        self.totals.add(usage, timing)
        metrics.REQUESTS.labels(engine, finish.value).inc()
        metrics.PROMPT_TOKENS.labels(engine).inc(usage.prompt_tokens)
        metrics.COMPLETION_TOKENS.labels(engine).inc(usage.completion_tokens)
        if usage.completion_tokens:
            metrics.TIME_TO_FIRST_TOKEN.labels(engine).observe(timing.time_to_first_token_ms / 1000)
        if usage.completion_tokens > 1:
            metrics.INTER_TOKEN_LATENCY.labels(engine).observe(timing.inter_token_latency_ms / 1000)

    async def GenerateStream(
        self, request: generator_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[generator_pb2.GenerateChunk]:
        async for chunk in self._stream(request, context):
            yield chunk

    async def Generate(
        self, request: generator_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> generator_pb2.GenerateResponse:
        parts: list[str] = []
        reply = generator_pb2.GenerateResponse(model=self.info.model)
        async for chunk in self._stream(request, context):
            parts.append(chunk.delta)
            if chunk.finish_reason:
                reply.finish_reason = chunk.finish_reason
                reply.usage.CopyFrom(chunk.usage)
                reply.timing.CopyFrom(chunk.timing)
        reply.text = "".join(parts)
        return reply

    def _count(self, messages: list[Message] | None, texts: list[str]) -> tuple[int, list[int]]:
        prompt = len(self._prepare(messages)[1]) if messages else 0
        return prompt, [len(self.engine.tokenize(t, chat=False)) for t in texts]

    async def CountTokens(
        self, request: generator_pb2.CountTokensRequest, context: grpc.aio.ServicerContext
    ) -> generator_pb2.CountTokensResponse:
        if not request.messages and not request.texts:
            raise InvalidArgument("send messages (counted as one prompt) or texts, or both")
        messages = (
            messages_of(request.messages, self.settings, field="messages")
            if request.messages
            else None
        )
        texts = list(request.texts)
        if len(texts) > MAX_COUNT_TEXTS:
            raise InvalidArgument(
                f"texts has {len(texts)} entries; the limit is {MAX_COUNT_TEXTS}: split the call"
            )
        chars = sum(len(t) for t in texts)
        if chars > self.settings.max_prompt_chars:
            raise InvalidArgument(
                f"texts hold {chars} characters; the limit is {self.settings.max_prompt_chars} "
                "(RAGRAIL_GENERATOR_MAX_PROMPT_CHARS)"
            )
        prompt, counts = await self._runner(self._count, messages, texts)
        return generator_pb2.CountTokensResponse(
            prompt_tokens=prompt, text_tokens=counts, context_length=self.info.context_length
        )

    async def Info(
        self, request: common_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> generator_pb2.GeneratorInfo:
        info = self.engine.info()
        return generator_pb2.GeneratorInfo(
            service=common_pb2.ServiceInfo(
                service="generator",
                version=VERSION,
                backend=info.engine,
                model=info.model,
                details={**info.details, **self.totals.details()},
            ),
            context_length=info.context_length,
            max_output_tokens=min(self.settings.max_output_tokens, info.context_length - 1),
        )

    async def close(self) -> None:
        await self.engine.close()
        self._runner.shutdown()
        if self.prompt_log is not None:
            self.prompt_log.close()


async def build(settings: GeneratorSettings) -> Built:
    engine = await asyncio.to_thread(load_engine, settings)
    await engine.start()
    servicer = GeneratorServicer(engine, settings)
    install_reload(servicer, settings)
    info = servicer.info
    return Built(
        specs=[
            ServiceSpec.of(
                generator_pb2, servicer, generator_pb2_grpc.add_GeneratorServicer_to_server
            )
        ],
        close=servicer.close,
        ready_message={
            "engine": info.engine,
            "model": info.model,
            "context_length": info.context_length,
        },
    )
