"""Prometheus metrics of the generator, next to the gRPC ones every service exports
(shared/metrics.py), on the same /metrics port. Labelled by engine."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

PROMPT_TOKENS = Counter(
    "ragrail_generator_prompt_tokens_total", "Prompt tokens of finished requests.", ["engine"]
)
COMPLETION_TOKENS = Counter(
    "ragrail_generator_completion_tokens_total", "Tokens generated.", ["engine"]
)
REQUESTS = Counter(
    "ragrail_generator_requests_total",
    "Generation requests by how they ended: stop, length, cancelled, or an error code.",
    ["engine", "finish"],
)
TIME_TO_FIRST_TOKEN = Histogram(
    "ragrail_generator_time_to_first_token_seconds",
    "From the request's arrival to its first generated token, queueing included.",
    ["engine"],
    buckets=_LATENCY_BUCKETS,
)
INTER_TOKEN_LATENCY = Histogram(
    "ragrail_generator_inter_token_latency_seconds",
    "Mean time between tokens after the first, one observation per request.",
    ["engine"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1),
)
QUEUE_WAIT = Histogram(
    "ragrail_generator_queue_wait_seconds",
    "Time a request waited for a batch slot and KV cache room.",
    ["engine"],
    buckets=_LATENCY_BUCKETS,
)
RUNNING = Gauge("ragrail_generator_running_requests", "Requests generating now.", ["engine"])
WAITING = Gauge("ragrail_generator_waiting_requests", "Requests queued for a slot.", ["engine"])
REJECTED = Counter(
    "ragrail_generator_rejected_total", "Requests refused because the queue was full.", ["engine"]
)
CANCELLED = Counter(
    "ragrail_generator_cancelled_total",
    "Requests dropped mid-generation because the caller went away or a stop string matched.",
    ["engine"],
)
BATCH_SIZE = Histogram(
    "ragrail_generator_batch_size",
    "Requests advanced together by one forward pass.",
    ["engine"],
    buckets=(1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256),
)
STEP_SECONDS = Histogram(
    "ragrail_generator_step_seconds",
    "Duration of one forward pass over the batch (decode step or prefill chunk).",
    ["engine"],
    buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
)
PREFIX_CACHE_TOKENS = Counter(
    "ragrail_generator_prefix_cache_tokens_total",
    "Prompt tokens whose KV cache was reused from an earlier or a running request with the "
    "same prefix instead of computed.",
    ["engine"],
)
