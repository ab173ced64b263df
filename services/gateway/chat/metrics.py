"""Prometheus metrics of the chat, served on the gateway's /metrics, and its log line."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram

if TYPE_CHECKING:
    from services.gateway.chat.state import ChatState

log = logging.getLogger("ragrail.gateway")
MESSAGE_LOGGED = 500  # characters of an error message in the log line

STAGE_SECONDS = Histogram(
    "ragrail_chat_stage_seconds",
    "Time spent in each stage of a chat completion.",
    ["stage"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
CHAT_REQUESTS = Counter(
    "ragrail_chat_requests_total",
    "Chat completions by outcome: answered, blocked_input, blocked_output, error (a service "
    "failed, before or during a stream), cancelled (the client left).",
    ["outcome", "stream"],
)
CHAT_TOKENS = Counter("ragrail_chat_tokens_total", "Tokens of chat completions.", ["kind"])
RAIL_VERDICTS = Counter(
    "ragrail_chat_rail_verdicts_total",
    "Guardrail verdicts seen by the gateway.",
    ["check", "verdict"],
)


def record(chat: ChatState, debug_log_prompts: bool) -> None:
    """Counts a finished chat and logs one line: what happened, never what was said unless
    debug_log_prompts."""
    answer = chat.answer
    assert answer is not None
    if answer.finish_reason != "content_filter":
        outcome = "answered"
    elif chat.blocked:
        outcome = "blocked_input"
    else:
        outcome = "blocked_output"
    CHAT_REQUESTS.labels(outcome, str(chat.options.stream).lower()).inc()
    CHAT_TOKENS.labels("prompt").inc(answer.prompt_tokens)
    CHAT_TOKENS.labels("completion").inc(answer.completion_tokens)
    report = chat.report
    extra: dict[str, object] = {
        "id": chat.id,
        "finish_reason": answer.finish_reason,
        "sources": len(chat.prompt.sources) if chat.prompt else 0,
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "input_rail": report.input.verdict if report.input else None,
        "retrieval_rails_changed": len(report.retrieval),
        "output_rail": report.output.verdict if report.output else None,
        **chat.timings.model_dump(),
    }
    if debug_log_prompts:
        extra["question"] = chat.turns[-1].text
        extra["answer"] = answer.text
    log.info("chat", extra=extra)


def chat_ended(outcome: str, stream: bool, chat_id: str | None = None, error: str = "") -> None:
    """Counts a chat that ended without an answer in ragrail_chat_requests_total (outcome
    error: a service failed, before or during the stream; cancelled: the client left), with
    one log line. Answered and blocked chats are counted by `record`."""
    CHAT_REQUESTS.labels(outcome, str(stream).lower()).inc()
    extra = {"id": chat_id, "outcome": outcome, "stream": stream, "error": error[:MESSAGE_LOGGED]}
    if outcome == "error":
        log.warning("chat failed", extra=extra)
    else:
        log.info("chat cancelled: the client left", extra=extra)
