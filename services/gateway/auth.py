"""API keys and per-key rate limiting, as ASGI middleware in front of every route.

Keys come from settings (`api_keys`, or `api_keys_file` with one key per line, for container
secrets); with none configured the gateway is open, as the local quickstart wants. A client
sends its key as `Authorization: Bearer <key>` (what OpenAI clients send) or `X-API-Key`.
Rate limits are token buckets per key (per client address when keys are off): `rate_limit_rpm`
requests a minute, bursts up to `rate_limit_burst`; beyond that a 429 with Retry-After.
Keys never reach a log: a key is named by the first 8 hex digits of its SHA-256.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from dataclasses import dataclass
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.errors import error_response
from services.gateway.settings import GatewaySettings

# Reachable without a key: liveness for orchestrators, metrics for Prometheus, the playground's
# static files and the API docs (the playground asks for a key before it calls the API).
OPEN_PATHS = ("/v1/health", "/metrics", "/docs", "/openapi.json", "/redoc")
OPEN_PREFIXES = ("/playground",)


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def load_keys(settings: GatewaySettings) -> list[str]:
    keys = [k for k in settings.api_keys if k]
    if settings.api_keys_file:
        path = Path(settings.api_keys_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SystemExit(
                f"cannot read RAGRAIL_GATEWAY_API_KEYS_FILE {path}: {exc.strerror}"
            ) from None
        keys += [line.strip() for line in text.splitlines() if line.strip()]
        if not keys:
            raise SystemExit(
                f"RAGRAIL_GATEWAY_API_KEYS_FILE {path} holds no key; put one key per line"
            )
    return keys


@dataclass
class Bucket:
    tokens: float
    updated: float


class TokenBuckets:
    def __init__(self, per_minute: int, burst: int) -> None:
        self.rate = per_minute / 60.0
        self.burst = max(burst, 1)
        self.buckets: dict[str, Bucket] = {}

    def take(self, who: str) -> float:
        """0 when the request may go, else the seconds until it could."""
        now = time.monotonic()
        bucket = self.buckets.get(who)
        if bucket is None:
            if len(self.buckets) > 100_000:  # forget idle clients rather than grow forever
                self.buckets.clear()
            bucket = self.buckets[who] = Bucket(float(self.burst), now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
        bucket.updated = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        return (1 - bucket.tokens) / self.rate


class ApiKeysAndRateLimit:
    def __init__(self, app: ASGIApp, settings: GatewaySettings, keys: list[str]) -> None:
        self.app = app
        self.keys = keys
        self.limits = (
            TokenBuckets(settings.rate_limit_rpm, settings.rate_limit_burst)
            if settings.rate_limit_rpm
            else None
        )

    def _key(self, scope: Scope) -> str | None:
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        api_key = headers.get(b"x-api-key")
        return api_key.decode("latin-1").strip() if api_key else None

    def _known(self, key: str) -> bool:
        # compare_digest against every key: no timing hint of how much of a key matched.
        return any(hmac.compare_digest(key.encode(), k.encode()) for k in self.keys)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or path in OPEN_PATHS
            or path == "/"
            or path.startswith(OPEN_PREFIXES)
            or scope.get("method") == "OPTIONS"  # CORS preflights carry no credentials
        ):
            await self.app(scope, receive, send)
            return
        who = (scope.get("client") or ("unknown", 0))[0]
        if self.keys:
            key = self._key(scope)
            if not key:
                await error_response(
                    401,
                    "missing API key: send it as 'Authorization: Bearer <key>' or 'X-API-Key'",
                    "Unauthenticated",
                )(scope, receive, send)
                return
            if not self._known(key):
                await error_response(401, f"unknown API key (id {key_id(key)})", "Unauthenticated")(
                    scope, receive, send
                )
                return
            who = key_id(key)
            scope.setdefault("state", {})["api_key_id"] = who
        if self.limits is not None:
            wait = self.limits.take(who)
            if wait > 0:
                response = error_response(
                    429,
                    f"rate limit of {self.limits.rate * 60:g} requests a minute reached; "
                    f"retry in {math.ceil(wait)} s",
                    "RateLimited",
                )
                response.headers["Retry-After"] = str(math.ceil(wait))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
