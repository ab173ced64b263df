"""The chat's typed objects: the options a request turns into once (`ChatOptions.of`), the
state its stages read and fill (`ChatState`), and their results (`Prompt`, `Answer`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import PurePath

from services.gateway.chat.conversation import Turn
from services.gateway.chat.grounding import Evidence, GroundingOptions, Reading
from services.gateway.chat.protocol import (
    AnswerReport,
    ChatCompletionRequest,
    EvidenceSpan,
    GuardrailsReport,
    StageTimings,
)
from services.gateway.search.passage import Passage
from services.gateway.search.plan import RetrievalPlan
from services.gateway.settings import GatewaySettings
from shared.clients import GeneratorInfo, Sampling
from shared.errors import DeadlineExceeded, FailedPrecondition


class Deadline:
    """What is left of a chat's deadline; every service call gets at most that."""

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


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """A chat request's options with every default applied, decided once."""

    sampling: Sampling  # max_tokens always set: the gateway's default, sent explicitly
    plan: RetrievalPlan
    rails: bool  # run the guardrails
    history_turns: int  # earlier user turns joined to the retrieval query
    citations: bool
    stream: bool
    include_usage: bool
    grounding: GroundingOptions

    @property
    def max_tokens(self) -> int:
        assert self.sampling.max_tokens is not None
        return self.sampling.max_tokens

    @classmethod
    def of(
        cls,
        req: ChatCompletionRequest,
        settings: GatewaySettings,
        *,
        reranker: bool,
        guardrails: bool,
        generator: GeneratorInfo | None = None,
    ) -> ChatOptions:
        """`generator`: the generator's Info as of this request (its model decides auto's
        order, GroundingOptions.of)."""
        rewrite = req.enable_query_rewriting
        if rewrite is None:
            rewrite = settings.chat_query_rewriting == "history"
        return cls(
            sampling=Sampling(
                temperature=req.temperature,
                top_p=req.top_p,
                top_k=req.top_k,
                max_tokens=req.max_completion_tokens or req.max_tokens or settings.chat_max_tokens,
                stop=tuple(req.stops),
                seed=req.seed,
                repetition_penalty=req.repetition_penalty,
            ),
            plan=RetrievalPlan.for_chat(req, settings, reranker=reranker),
            rails=_rails(req.enable_guardrails, guardrails, settings),
            history_turns=settings.chat_history_turns if rewrite else 0,
            citations=req.enable_citations,
            stream=req.stream,
            include_usage=bool(req.stream_options and req.stream_options.include_usage),
            grounding=GroundingOptions.of(req, settings, generator.model if generator else ""),
        )


def _rails(wanted: bool | None, configured: bool, settings: GatewaySettings) -> bool:
    if wanted is None:
        return configured
    if wanted and not configured:
        raise FailedPrecondition(
            "enable_guardrails is true but no guardrails service is configured; set "
            "RAGRAIL_GATEWAY_GUARDRAILS_URL or send enable_guardrails: false"
        )
    if not wanted and configured and not settings.chat_guardrails_optional:
        raise FailedPrecondition(
            "this gateway does not let requests switch the guardrails off "
            "(RAGRAIL_GATEWAY_CHAT_GUARDRAILS_OPTIONAL=false)"
        )
    return wanted


@dataclass(frozen=True, slots=True)
class Prompt:
    """What the prompt stage built: the messages for the generator and the sources in them."""

    messages: list[Turn]
    sources: list[Passage]  # those that fit, numbered from 1 in this order
    prompt_tokens: int  # as budgeted (exact when nothing was left out)
    dropped_sources: int
    dropped_turns: int


@dataclass(slots=True)
class Answer:
    text: str
    finish_reason: str  # stop, length, or content_filter when a rail blocked it
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class ChatState:
    """One chat as it goes through the stages: each reads what earlier ones left and adds
    its own result."""

    id: str
    created: int
    model: str
    generator: GeneratorInfo
    options: ChatOptions
    turns: list[Turn]
    deadline: Deadline
    started: float  # time.perf_counter() at arrival
    report: GuardrailsReport
    timings: StageTimings = field(default_factory=StageTimings)
    warnings: list[str] = field(default_factory=list)
    blocked: bool = False  # the input rails refused the question: nothing is generated
    # Set with `blocked` when the retrieval rails dropped every chunk found: what the answer
    # says instead of the refusal (which sources were withheld, by which rail and why).
    withheld: str = ""
    query: str = ""  # what was retrieved with
    passages: list[Passage] = field(default_factory=list)  # retrieved, then checked
    prompt: Prompt | None = None
    answer: Answer | None = None
    # Grounded answers (stages/evidence.py, stages/answer.py).
    evidence: Evidence | None = None  # the sources' sentences, scored and selected
    reading: Reading | None = None  # the reader's best span
    abstain: bool = False  # the sources do not hold the answer
    answer_report: AnswerReport | None = None
    # Every sentence of the answer was found supported by its sources here (extracted, or
    # generated and checked): the output rails are told so, and the guardrails' grounding
    # rail does not score it again (grounding is computed once per answer).
    grounded: bool = False
    highlights: dict[int, list[EvidenceSpan]] = field(default_factory=dict)  # by source [n]

    def ms_since(self, start: float) -> float:
        return round((time.perf_counter() - start) * 1000, 2)


def model_id(info: GeneratorInfo) -> str:
    """A model name a client can show: the file or directory name, not the whole path; for a
    model behind a server ("name@http://host/v1", the openai engine), the name the server
    gives it ("meta/llama-3.1-8b-instruct"), or its file name when that is a path."""
    name, at, where = info.model.rpartition("@")
    if at and "://" in where:
        return (PurePath(name).name if name.startswith("/") else name) or info.backend
    return PurePath(info.model).name or info.backend
