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


def start_metrics_server(host: str, port: int) -> int:
    """Serves /metrics on (host, port) in a background thread; returns the bound port."""
    server, _thread = start_http_server(port, addr=host)
    return int(server.server_address[1])
