"""Prometheus metrics of the chat pipeline, served on the gateway's /metrics."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

STAGE_SECONDS = Histogram(
    "ragrail_chat_stage_seconds",
    "Time spent in each stage of a chat completion.",
    ["stage"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
CHAT_REQUESTS = Counter(
    "ragrail_chat_requests_total",
    "Chat completions by outcome: answered, blocked_input, blocked_output, error.",
    ["outcome", "stream"],
)
CHAT_TOKENS = Counter("ragrail_chat_tokens_total", "Tokens of chat completions.", ["kind"])
RAIL_VERDICTS = Counter(
    "ragrail_chat_rail_verdicts_total",
    "Guardrail verdicts seen by the gateway.",
    ["check", "verdict"],
)
