"""API keys and per-key rate limiting, as ASGI middleware in front of every route.

Keys come from settings (`api_keys`, or `api_keys_file`: one key per line, or a YAML file of
scoped principals, see principals.py; reloaded on SIGHUP); with none configured the gateway
is open, as the local quickstart wants. A client sends its key as `Authorization: Bearer
<key>` (what OpenAI clients send) or `X-API-Key`. The request's principal goes to
`scope["state"]["principal"]` for the routes' scope checks (access.py). Rate limits are token
buckets per principal (per client address when keys are off): its own rate_limit_rpm, else
`rate_limit_rpm` requests a minute, bursts up to `rate_limit_burst`; beyond that a 429 with
Retry-After. Keys never reach a log: a key is named by its principal's name.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.http import audit
from services.gateway.http.asgi import HttpMiddleware
from services.gateway.http.errors import error_response
from services.gateway.http.principals import OPEN, Keys, key_id
from services.gateway.http.response_status import ResponseStatus
from services.gateway.settings import GatewaySettings

# Reachable without a key: liveness for orchestrators, metrics for Prometheus, the playground's
# static files and the API docs (the playground asks for a key before it calls the API).
OPEN_PATHS = ("/v1/health", "/metrics", "/docs", "/openapi.json", "/redoc")
OPEN_PREFIXES = ("/playground",)


@dataclass
class Bucket:
    tokens: float
    updated: float


class TokenBuckets:
    def __init__(self, per_minute: int, burst: int) -> None:
        self.rate = per_minute / 60.0
        self.burst = max(burst, 1)
        self.buckets: dict[str, Bucket] = {}

    def take(self, who: str, per_minute: int | None = None) -> float:
        """0 when the request may go, else the seconds until it could; `per_minute` overrides
        the rate for this caller (a principal's own limit)."""
        rate = self.rate if per_minute is None else per_minute / 60.0
        if rate <= 0:
            return 0.0
        now = time.monotonic()
        bucket = self.buckets.get(who)
        if bucket is None:
            if len(self.buckets) > 100_000:  # forget idle clients rather than grow forever
                self.buckets.clear()
            bucket = self.buckets[who] = Bucket(float(self.burst), now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        return (1 - bucket.tokens) / rate


class ApiKeysAndRateLimit(HttpMiddleware):
    def __init__(self, app: ASGIApp, settings: GatewaySettings, keys: Keys) -> None:
        super().__init__(app)
        self.keys = keys
        self.limits = TokenBuckets(settings.rate_limit_rpm, settings.rate_limit_burst)

    def _key(self, scope: Scope) -> str | None:
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        api_key = headers.get(b"x-api-key")
        return api_key.decode("latin-1").strip() if api_key else None

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            path in OPEN_PATHS
            or path == "/"
            or path.startswith(OPEN_PREFIXES)
            or scope.get("method") == "OPTIONS"  # CORS preflights carry no credentials
        ):
            await self.app(scope, receive, send)
            return
        who = (scope.get("client") or ("unknown", 0))[0]
        principal = OPEN
        ring = self.keys.ring  # one ring for the whole request, whatever a reload does
        if ring:
            key = self._key(scope)
            if not key:
                audit.denied(scope, audit.UNKNOWN, "missing_key")
                await error_response(
                    401,
                    "missing API key: send it as 'Authorization: Bearer <key>' or 'X-API-Key'",
                    "Unauthenticated",
                )(scope, receive, send)
                return
            found = ring.lookup(key)
            if found is None:
                audit.denied(scope, audit.UNKNOWN, "unknown_key")
                await error_response(401, f"unknown API key (id {key_id(key)})", "Unauthenticated")(
                    scope, receive, send
                )
                return
            principal = found
            who = principal.name
            scope.setdefault("state", {})["api_key_id"] = principal.name
        state = scope.setdefault("state", {})
        state["principal"] = principal
        wait = self.limits.take(who, principal.rate_limit_rpm)
        if wait > 0:
            audit.denied(scope, principal.name, "rate_limited")
            response = error_response(
                429,
                f"rate limit of {self._rpm(principal.rate_limit_rpm):g} requests a minute "
                f"reached; retry in {math.ceil(wait)} s",
                "RateLimited",
            )
            response.headers["Retry-After"] = str(math.ceil(wait))
            await response(scope, receive, send)
            return
        status = ResponseStatus(send)
        try:
            await self.app(scope, receive, status)
        finally:
            # Routes that write name their action and collection (access.authorize).
            write = state.get("audit_write")
            if write is not None:
                audit.wrote(scope, principal.name, write[0], write[1], status.code)

    def _rpm(self, own: int | None) -> float:
        return self.limits.rate * 60 if own is None else own
