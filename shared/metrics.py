"""Prometheus metrics every gRPC service exports on its own /metrics port."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

GRPC_REQUESTS = Counter(
    "ragrail_grpc_requests_total",
    "gRPC calls handled, by method and status code.",
    ["service", "method", "code"],
)
GRPC_LATENCY = Histogram(
    "ragrail_grpc_request_duration_seconds",
    "Time spent handling a gRPC call.",
    ["service", "method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
GRPC_IN_FLIGHT = Gauge(
    "ragrail_grpc_in_flight_requests", "gRPC calls being handled now.", ["service"]
)
GRPC_ERRORS = Counter(
    "ragrail_grpc_errors_total",
    "gRPC calls that ended with a status other than OK.",
    ["service", "method", "code"],
)
GRPC_AUTH_REJECTED = Counter(
    "ragrail_grpc_auth_rejected_total",
    "gRPC calls refused for a missing or wrong shared token.",
    ["service", "method"],
)
GRPC_CANCELLED = Counter(
    "ragrail_grpc_cancelled_total",
    "gRPC calls whose client cancelled or left before the answer was complete.",
    ["service", "method"],
)
CLIENT_RETRIES = Counter(
    "ragrail_grpc_client_retries_total",
    "Calls to a peer service tried again after it was unavailable (a restart, a late start).",
    ["service", "method"],
)


def start_metrics_server(host: str, port: int) -> int:
    """Serves /metrics on (host, port) in a background thread; returns the bound port."""
    server, _thread = start_http_server(port, addr=host)
    return int(server.server_address[1])
