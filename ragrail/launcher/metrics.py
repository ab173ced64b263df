"""The launcher's own /metrics: restarts of the services it runs."""

from __future__ import annotations

import os
from collections.abc import Callable

from prometheus_client import Counter, start_http_server

# Served by `ragrail up` on RAGRAIL_LAUNCHER_METRICS_PORT (9150 by default, -1 turns it off):
# the services' own /metrics cannot count their own deaths.
RESTARTS = Counter(
    "ragrail_launcher_restarts_total",
    "Services the launcher found exited, by what it did: restarted, or gave up after 5 in 60 s.",
    ["service", "action"],
)
METRICS_PORT_ENV = "RAGRAIL_LAUNCHER_METRICS_PORT"
DEFAULT_METRICS_PORT = 9150


def start_metrics(say: Callable[[str], None]) -> int:
    """Serves the launcher's /metrics on loopback; returns the port (-1 when turned off)."""
    port = int(os.environ.get(METRICS_PORT_ENV, DEFAULT_METRICS_PORT))
    if port < 0:
        return -1
    try:
        server, _thread = start_http_server(port, addr="127.0.0.1")
    except OSError as exc:
        say(
            f"launcher metrics not served: port {port} is taken ({exc.strerror}); "
            f"set {METRICS_PORT_ENV}"
        )
        return -1
    return int(server.server_address[1])
