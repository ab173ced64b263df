"""The audit trail: one structured line on the `ragrail.audit` logger for each write and each
denied request, and a Prometheus counter of denials per key name.

A line names the principal (the key file's name, or `key-<8 hex of its SHA-256>`), never the
key; the route as its template (`DELETE /v1/collections/{name}`), the collection, the action
and the outcome (the HTTP status of a write, `denied` with a reason otherwise).
"""

from __future__ import annotations

import logging

from prometheus_client import Counter
from starlette.types import Scope

log = logging.getLogger("ragrail.audit")
ACCESS_DENIED = Counter(
    "ragrail_gateway_access_denied_total",
    "Requests refused by API key checks, per key name (unknown: a key not in the key file).",
    ["key_name", "reason"],
)
# Unknown keys share one label: a label per presented key would let anyone grow the metrics.
UNKNOWN = "unknown"


def route_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None) or scope.get("path", "")
    return f"{scope.get('method', '')} {path}"


def denied(
    scope: Scope, key_name: str, reason: str, collection: str = "", action: str = ""
) -> None:
    ACCESS_DENIED.labels(key_name, reason).inc()
    log.warning(
        "access denied",
        extra={
            "audit": "denied",
            "key_name": key_name,
            "route": route_of(scope),
            "collection": collection,
            "action": action,
            "outcome": "denied",
            "reason": reason,
            "client": (scope.get("client") or ("", 0))[0],
        },
    )


def wrote(scope: Scope, key_name: str, action: str, collection: str, status: int) -> None:
    log.info(
        "write",
        extra={
            "audit": "write",
            "key_name": key_name,
            "route": route_of(scope),
            "collection": collection,
            "action": action,
            "outcome": status,
        },
    )
