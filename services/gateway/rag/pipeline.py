"""One chat completion through the services:

    input rails -> retrieval query -> embed + retrieve (vdb_top_k) -> rerank (reranker_top_k)
    -> retrieval rails -> prompt within the context window -> generate -> output rails

`prepare` runs everything before generation (and raises the HTTP errors a client should see
before any byte of a stream); `complete` and `stream` generate and check the answer. Each
stage is switched by the request or by settings, and every call to a service gets what is
left of the request's deadline.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import PurePath

from opentelemetry import trace

from services.gateway import schemas
from services.gateway.clients import Services
from services.gateway.openai_schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionRequest,
    Choice,
    Citation,
    GuardrailsReport,
    StageTimings,
    Usage,
)
from services.gateway.rag import metrics
from services.gateway.rag.conversation import Turn, retrieval_query, turns_of
from services.gateway.rag.prompt import Prompt, PromptBuilder, Source
from services.gateway.rag.rails import Rails
from services.gateway.search import run_search
from services.gateway.settings import GatewaySettings
from shared.errors import DeadlineExceeded, FailedPrecondition
from shared.proto.ragrail.v1 import generator_pb2
from shared.tracing import outgoing_metadata, tracer

log = logging.getLogger("ragrail.gateway")
FINISH_REASONS = {
    generator_pb2.FINISH_REASON_STOP: "stop",
    generator_pb2.FINISH_REASON_LENGTH: "length",
    generator_pb2.FINISH_REASON_CANCELLED: "stop",
}
SNIPPET_CHARS = 300


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds
        self.seconds = seconds

    def left(self, cap: float | None = None) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(
                f"the chat request did not finish within its {self.seconds:g} s deadline "
                "(RAGRAIL_GATEWAY_GENERATION_TIMEOUT_S)"
            )
        return min(left, cap) if cap else left


@dataclass
class Prepared:
    """Everything decided before generation."""

    id: str
    created: int
    model: str
    turns: list[Turn]
    sampling: generator_pb2.SamplingParams
    deadline: Deadline
    started: float
    rails: Rails | None
    report: GuardrailsReport
    timings: StageTimings
    warnings: list[str] = field(default_factory=list)
    prompt: Prompt | None = None  # None when the input rails blocked the question
    citations: bool = True
    stream: bool = False
    include_usage: bool = False

    def ms_since(self, start: float) -> float:
        return round((time.perf_counter() - start) * 1000, 2)


def model_id(info: generator_pb2.GeneratorInfo) -> str:
    """A model name a client can show: the file or directory name, not the whole path."""
    return PurePath(info.service.model).name or info.service.backend


class ChatPipeline:
    def __init__(self, services: Services, settings: GatewaySettings) -> None:
        self.services = services
        self.settings = settings

    # -- before generation ------------------------------------------------------------

    async def prepare(self, req: ChatCompletionRequest) -> Prepared:
        started = time.perf_counter()
        deadline = Deadline(self.settings.generation_timeout_s)
        rails = self._rails(req)
        info = await self.services.generator_info()
        max_tokens = req.max_completion_tokens or req.max_tokens or self.settings.chat_max_tokens
        prepared = Prepared(
            id=f"chatcmpl-{uuid.uuid4().hex[:24]}",
            created=int(time.time()),
            model=model_id(info),
            turns=turns_of(req.messages),
            sampling=generator_pb2.SamplingParams(
                temperature=req.temperature,
                top_p=req.top_p,
                top_k=req.top_k,
                max_tokens=max_tokens,
                stop=req.stops,
                seed=req.seed,
                repetition_penalty=req.repetition_penalty,
            ),
            deadline=deadline,
            started=started,
            rails=rails,
            report=GuardrailsReport(enabled=rails is not None),
            timings=StageTimings(),
            citations=req.enable_citations,
            stream=req.stream,
            include_usage=bool(req.stream_options and req.stream_options.include_usage),
        )
        if self.services.guardrails is None:
            prepared.warnings.append("no guardrails service is configured: answered without rails")
        elif rails is None:
            prepared.warnings.append("guardrails switched off by the request")

        if rails is not None:
            t = time.perf_counter()
            with tracer.start_as_current_span("chat.input_rails"):
                verdict, text = await rails.check_input(
                    prepared.turns, deadline.left(self.settings.guardrails_timeout_s)
                )
            self._observe("input_rails", t, prepared)
            prepared.report.input = verdict
            metrics.RAIL_VERDICTS.labels("input", verdict.verdict).inc()
            if verdict.verdict == "block":
                return prepared
            if verdict.modified:
                last = prepared.turns[-1]
                prepared.turns[-1] = Turn(last.role, text)

        sources: list[Source] = []
        use_kb = req.use_knowledge_base if req.use_knowledge_base is not None else True
        collections = req.collections if use_kb else []
        query = ""
        if collections:
            query = retrieval_query(prepared.turns, self._history_turns(req))
            with tracer.start_as_current_span("chat.retrieval"):
                sources = await self._retrieve(req, collections, query, prepared)
            if rails is not None and sources:
                t = time.perf_counter()
                with tracer.start_as_current_span("chat.retrieval_rails"):
                    checked = await rails.check_retrieval(
                        query, sources, deadline.left(self.settings.guardrails_timeout_s)
                    )
                self._observe("retrieval_rails", t, prepared)
                prepared.report.retrieval = checked.changed
                for change in checked.changed:
                    metrics.RAIL_VERDICTS.labels("retrieval", change["verdict"]).inc()
                sources = checked.sources

        t = time.perf_counter()
        builder = PromptBuilder(self._count_tokens(deadline), info.context_length)
        with tracer.start_as_current_span("chat.prompt"):
            prepared.prompt = await builder.build(
                prepared.turns,
                sources,
                self.settings.chat_system_prompt if collections else None,
                max_tokens,
            )
        prepared.timings.prompt_ms = prepared.ms_since(t)
        metrics.STAGE_SECONDS.labels("prompt").observe(prepared.timings.prompt_ms / 1000)
        if prepared.prompt.dropped_sources:
            prepared.warnings.append(
                f"{prepared.prompt.dropped_sources} retrieved chunk(s) did not fit in the "
                "model's context window and were left out"
            )
        if prepared.prompt.dropped_turns:
            prepared.warnings.append(
                f"the {prepared.prompt.dropped_turns} oldest message(s) did not fit in the "
                "model's context window and were left out"
            )
        return prepared

    def _rails(self, req: ChatCompletionRequest) -> Rails | None:
        configured = self.services.guardrails
        wanted = configured is not None if req.enable_guardrails is None else req.enable_guardrails
        if wanted and configured is None:
            raise FailedPrecondition(
                "enable_guardrails is true but no guardrails service is configured; set "
                "RAGRAIL_GATEWAY_GUARDRAILS_URL or send enable_guardrails: false"
            )
        if not wanted and configured is not None and not self.settings.chat_guardrails_optional:
            raise FailedPrecondition(
                "this gateway does not let requests switch the guardrails off "
                "(RAGRAIL_GATEWAY_CHAT_GUARDRAILS_OPTIONAL=false)"
            )
        return Rails(configured) if wanted and configured is not None else None

    def _history_turns(self, req: ChatCompletionRequest) -> int:
        rewrite = req.enable_query_rewriting
        if rewrite is None:
            rewrite = self.settings.chat_query_rewriting == "history"
        return self.settings.chat_history_turns if rewrite else 0

    async def _retrieve(
        self,
        req: ChatCompletionRequest,
        collections: list[str],
        query: str,
        prepared: Prepared,
    ) -> list[Source]:
        keep = req.reranker_top_k or self.settings.chat_reranker_top_k
        rerank = req.enable_reranker
        if rerank is None:
            rerank = self.services.reranker is not None
        searches = [
            schemas.SearchRequest(
                query=query,
                collection=name,
                top_k=keep,
                mode=req.search_mode,
                filter=req.filter,
                vdb_top_k=req.vdb_top_k or max(self.settings.chat_vdb_top_k, keep),
                rerank=rerank,
                reranker_top_k=keep,
            )
            for name in collections
        ]
        t = time.perf_counter()
        timeout = prepared.deadline.left(self.settings.request_timeout_s)
        results = await asyncio.gather(
            *(run_search(self.services, self.settings, s, timeout_s=timeout) for s in searches)
        )
        self._observe("retrieval", t, prepared, record=False)
        prepared.timings.retrieval_ms = max(
            r.timings.embed_ms + r.timings.retrieval_ms for r in results
        )
        prepared.timings.rerank_ms = max(r.timings.rerank_ms for r in results)
        for result in results:
            prepared.warnings += [f"{result.collection}: {w}" for w in result.warnings]
        return merge_hits(results, keep)

    def _count_tokens(self, deadline: Deadline):  # type: ignore[no-untyped-def]
        async def count(
            request: generator_pb2.CountTokensRequest,
        ) -> generator_pb2.CountTokensResponse:
            return await self.services.generator.call(
                "CountTokens", request, timeout_s=deadline.left(self.settings.request_timeout_s)
            )

        return count

    def _observe(self, stage: str, start: float, prepared: Prepared, record: bool = True) -> None:
        elapsed = time.perf_counter() - start
        metrics.STAGE_SECONDS.labels(stage).observe(elapsed)
        if record:
            prepared.timings.guardrails_ms = round(
                prepared.timings.guardrails_ms + elapsed * 1000, 2
            )

    # -- generation ---------------------------------------------------------------------

    def _generate_request(self, prepared: Prepared) -> generator_pb2.GenerateRequest:
        assert prepared.prompt is not None
        return generator_pb2.GenerateRequest(
            messages=prepared.prompt.messages, sampling=prepared.sampling, request_id=prepared.id
        )

    async def complete(self, prepared: Prepared) -> ChatCompletion:
        if prepared.prompt is None:
            return self._finish(prepared, self.settings.chat_refusal, "content_filter", 0, 0)
        t = time.perf_counter()
        with tracer.start_as_current_span("chat.generation"):
            reply: generator_pb2.GenerateResponse = await self.services.generator.call(
                "Generate", self._generate_request(prepared), timeout_s=prepared.deadline.left()
            )
        prepared.timings.generation_ms = prepared.ms_since(t)
        prepared.timings.ttft_ms = round(reply.timing.time_to_first_token_ms, 2)
        metrics.STAGE_SECONDS.labels("generation").observe(prepared.timings.generation_ms / 1000)
        answer, finish = await self._output_rails(prepared, reply.text)
        return self._finish(
            prepared,
            answer,
            finish or FINISH_REASONS.get(reply.finish_reason, "stop"),
            reply.usage.prompt_tokens,
            reply.usage.completion_tokens,
        )

    async def _output_rails(self, prepared: Prepared, answer: str) -> tuple[str, str | None]:
        """The answer to send and, when a rail blocked it, finish_reason content_filter."""
        if prepared.rails is None:
            return answer, None
        assert prepared.prompt is not None
        t = time.perf_counter()
        with tracer.start_as_current_span("chat.output_rails"):
            verdict, checked = await prepared.rails.check_output(
                prepared.turns,
                answer,
                prepared.prompt.sources,
                prepared.deadline.left(self.settings.guardrails_timeout_s),
            )
        self._observe("output_rails", t, prepared)
        prepared.report.output = verdict
        metrics.RAIL_VERDICTS.labels("output", verdict.verdict).inc()
        if verdict.verdict == "block":
            return self.settings.chat_refusal, "content_filter"
        return checked, None

    def _citations(self, prepared: Prepared, answer: str) -> list[Citation]:
        if not prepared.citations or prepared.prompt is None:
            return []
        return [
            Citation(
                index=i,
                document_id=s.document_id,
                document_name=s.document_name,
                chunk_id=s.chunk_id,
                chunk_index=s.chunk_index,
                collection=s.collection,
                score=s.score,
                snippet=s.text[:SNIPPET_CHARS],
                cited=f"[{i}]" in answer,
            )
            for i, s in enumerate(prepared.prompt.sources, start=1)
        ]

    def _finish(
        self,
        prepared: Prepared,
        answer: str,
        finish: str,
        prompt_tokens: int,
        completion_tokens: int,
    ) -> ChatCompletion:
        prepared.timings.total_ms = prepared.ms_since(prepared.started)
        self._count(prepared, finish, prompt_tokens, completion_tokens)
        self._log(prepared, answer, finish, prompt_tokens, completion_tokens)
        return ChatCompletion(
            id=prepared.id,
            created=prepared.created,
            model=prepared.model,
            choices=[Choice(message=AssistantMessage(content=answer), finish_reason=finish)],
            usage=Usage(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                total_tokens=prompt_tokens + completion_tokens,
            ),
            citations=self._citations(prepared, answer),
            guardrails=prepared.report,
            timings=prepared.timings,
            warnings=prepared.warnings,
        )

    def _log(
        self, prepared: Prepared, answer: str, finish: str, prompt: int, completion: int
    ) -> None:
        """One line per chat: what happened, never what was said unless debug_log_prompts."""
        report = prepared.report
        extra: dict[str, object] = {
            "id": prepared.id,
            "finish_reason": finish,
            "sources": len(prepared.prompt.sources) if prepared.prompt else 0,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "input_rail": report.input.verdict if report.input else None,
            "retrieval_rails_changed": len(report.retrieval),
            "output_rail": report.output.verdict if report.output else None,
            **prepared.timings.model_dump(),
        }
        if self.settings.debug_log_prompts:
            extra["question"] = prepared.turns[-1].text
            extra["answer"] = answer
        log.info("chat", extra=extra)

    def _count(self, prepared: Prepared, finish: str, prompt: int, completion: int) -> None:
        if finish != "content_filter":
            outcome = "answered"
        elif prepared.prompt is None:
            outcome = "blocked_input"
        else:
            outcome = "blocked_output"
        metrics.CHAT_REQUESTS.labels(outcome, str(prepared.stream).lower()).inc()
        metrics.CHAT_TOKENS.labels("prompt").inc(prompt)
        metrics.CHAT_TOKENS.labels("completion").inc(completion)

    async def stream(self, prepared: Prepared) -> AsyncIterator[str]:
        """Server-sent events in OpenAI's chunk format, ending with `data: [DONE]`. The first
        event is produced only once the generator has answered, so a generator that is down
        fails the request with a 503 before the stream starts. With output rails on, the
        answer is held back until they pass it (chat_stream_output_rails=buffer) or streamed
        as it comes and judged at the end (after)."""
        if prepared.prompt is None:
            yield self._event(prepared, {"role": "assistant", "content": ""}, None)
            yield self._event(prepared, {"content": self.settings.chat_refusal}, None)
            final = self._finish(prepared, self.settings.chat_refusal, "content_filter", 0, 0)
            yield self._final_event(prepared, final)
            yield "data: [DONE]\n\n"
            return
        hold = prepared.rails is not None and self.settings.chat_stream_output_rails == "buffer"
        t = time.perf_counter()
        # Made current only to take its traceparent: this generator's later steps run in the
        # response's context, where a span made current here could not be detached.
        span = tracer.start_span("chat.generation")
        with trace.use_span(span, end_on_exit=False):
            metadata = outgoing_metadata()
        chunks = self.services.generator.stream(
            "GenerateStream",
            self._generate_request(prepared),
            timeout_s=prepared.deadline.left(),
            metadata=metadata,
        )
        parts: list[str] = []
        last: generator_pb2.GenerateChunk | None = None
        first = True
        try:
            async for chunk in chunks:
                if first:
                    prepared.timings.ttft_ms = prepared.ms_since(t)
                    yield self._event(prepared, {"role": "assistant", "content": ""}, None)
                    first = False
                if chunk.delta:
                    parts.append(chunk.delta)
                    if not hold:
                        yield self._event(prepared, {"content": chunk.delta}, None)
                if chunk.HasField("usage"):
                    last = chunk
        finally:
            await chunks.aclose()  # a client gone mid-stream cancels the generator call
            span.end()
        prepared.timings.generation_ms = prepared.ms_since(t)
        metrics.STAGE_SECONDS.labels("generation").observe(prepared.timings.generation_ms / 1000)
        answer = "".join(parts)
        checked, blocked = await self._output_rails(prepared, answer)
        if hold:
            yield self._event(prepared, {"content": checked}, None)
        finish = blocked or (FINISH_REASONS.get(last.finish_reason, "stop") if last else "stop")
        prompt_tokens = last.usage.prompt_tokens if last else 0
        completion_tokens = last.usage.completion_tokens if last else 0
        final = self._finish(prepared, checked, finish, prompt_tokens, completion_tokens)
        yield self._final_event(prepared, final)
        if prepared.include_usage:
            yield _sse(self._chunk(prepared, [], usage=final.usage.model_dump()))
        yield "data: [DONE]\n\n"

    def _chunk(self, prepared: Prepared, choices: list[dict], **extra: object) -> dict:
        return {
            "id": prepared.id,
            "object": "chat.completion.chunk",
            "created": prepared.created,
            "model": prepared.model,
            "choices": choices,
            **extra,
        }

    def _event(self, prepared: Prepared, delta: dict, finish: str | None) -> str:
        return _sse(self._chunk(prepared, [{"index": 0, "delta": delta, "finish_reason": finish}]))

    def _final_event(self, prepared: Prepared, final: ChatCompletion) -> str:
        """The last chunk: finish_reason and ragrail's citations, rails, timings, warnings."""
        choice = {"index": 0, "delta": {}, "finish_reason": final.choices[0].finish_reason}
        return _sse(
            self._chunk(
                prepared,
                [choice],
                citations=[c.model_dump() for c in final.citations],
                guardrails=final.guardrails.model_dump(),
                timings=final.timings.model_dump(),
                warnings=final.warnings,
            )
        )


def merge_hits(results: list[schemas.SearchResponse], keep: int) -> list[Source]:
    """The best `keep` chunks over one or more collections: by score when every collection was
    reranked by the same cross-encoder (comparable scores), else by rank, round-robin."""
    tagged = [[(r.collection, h) for h in r.hits] for r in results]
    if len(results) == 1:
        merged = tagged[0]
    elif all(r.reranked for r in results):
        merged = sorted((x for block in tagged for x in block), key=lambda x: -x[1].score)
    else:
        longest = max(len(block) for block in tagged)
        merged = [block[i] for i in range(longest) for block in tagged if i < len(block)]
    return [
        Source(
            chunk_id=h.chunk_id,
            document_id=h.document_id,
            document_name=h.document_name,
            chunk_index=h.chunk_index,
            collection=collection,
            score=h.score,
            text=h.text,
        )
        for collection, h in merged[:keep]
    ]


def _sse(payload: dict) -> str:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"
