"""Browser safety for a gateway on the user's machine: what keeps a web page open in the same
browser from using it.

- **Host names.** Without API keys, only the names the gateway is meant to be reached by are
  answered (localhost names, the bind address, `allowed_hosts`); anything else is a 421. This
  stops DNS rebinding, where a page's own domain is re-pointed at 127.0.0.1 so the browser
  treats the gateway as same-origin with it. With API keys on, a rebound page has no key, so
  the check runs only when `allowed_hosts` is set.
- **Origins.** A state-changing request (POST, PUT, PATCH, DELETE) whose `Origin` is neither
  the gateway's own nor one of `cors_origins` is a 403, whatever its content type: a page at
  another origin may not write to the knowledge base, even with a "simple" request the
  browser sends without asking (a multipart upload was accepted and stored).
- **Forms.** Form and multipart posts without an `Origin` are refused too when the browser
  says, in `Sec-Fetch-Site`, that they come from another site. Every current browser sends
  `Origin` on such a post, so this is a second line; curl and the ragrail client send
  neither header and are not browsers. `csrf_require_header` goes further: such posts must
  carry `X-Requested-With` or an API key, which no page can add cross-origin without a CORS
  preflight the gateway would refuse.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.http.asgi import HttpMiddleware
from services.gateway.http.errors import error_response
from services.gateway.settings import GatewaySettings

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
_ALL_INTERFACES = frozenset({"", "0.0.0.0", "::", "[::]"})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
# Content types a page can post cross-origin without a CORS preflight.
_SIMPLE_TYPES = (b"multipart/form-data", b"application/x-www-form-urlencoded", b"text/plain")
_CUSTOM_HEADERS = (b"x-requested-with", b"x-api-key", b"authorization")


def _hostname(host: str) -> str:
    """`Host` without its port, lowercased: 'LOCALHOST:8080' -> 'localhost', '[::1]:80' ->
    '[::1]'."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class HostNames:
    """The Host names a gateway answers to; '*' is any, '*.example.com' any subdomain."""

    def __init__(self, settings: GatewaySettings) -> None:
        names = {n.strip().lower() for n in settings.allowed_hosts if n.strip()}
        self.any = "*" in names
        self.suffixes = tuple(n[1:] for n in names if n.startswith("*."))
        self.exact = {n for n in names if not n.startswith("*")} | LOCAL_HOSTS
        bind = settings.host.strip().lower()
        if bind not in _ALL_INTERFACES:
            self.exact.add(f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind)
        self.configured = bool(names)

    def allows(self, host: str) -> bool:
        name = _hostname(host)
        return self.any or name in self.exact or name.endswith(self.suffixes)


class BrowserSafety(HttpMiddleware):
    def __init__(self, app: ASGIApp, settings: GatewaySettings, keyless: bool) -> None:
        super().__init__(app)
        self.hosts = HostNames(settings)
        self.check_host = (keyless or self.hosts.configured) and not self.hosts.any
        self.origins = {o.rstrip("/").lower() for o in settings.cors_origins}
        self.any_origin = "*" in self.origins
        self.require_header = settings.csrf_require_header

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1")
        refusal = None
        if self.check_host and host and not self.hosts.allows(host):
            refusal = (
                421,
                f"this gateway does not answer to the host name '{_hostname(host)[:100]}'; "
                "add it to RAGRAIL_GATEWAY_ALLOWED_HOSTS if it is yours",
                "MisdirectedRequest",
            )
        elif scope["method"] not in _SAFE_METHODS:
            refusal = self._cross_origin(headers, host)
        if refusal is not None:
            await error_response(*refusal)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _origin_allowed(self, origin: str, host: str) -> bool:
        origin = origin.rstrip("/").lower()
        if self.any_origin or origin in self.origins:
            return True
        parts = urlsplit(origin)
        # Same origin: the page was served by this gateway, under the name it was asked by.
        return parts.scheme in ("http", "https") and parts.netloc == host.lower()

    def _cross_origin(self, headers: dict[bytes, bytes], host: str) -> tuple[int, str, str] | None:
        origin = headers.get(b"origin")
        if origin is not None:
            text = origin.decode("latin-1")
            if self._origin_allowed(text, host):
                return None
            return (
                403,
                f"cross-origin request from '{text[:100]}' refused: a page at another origin "
                "may not change this gateway's data; add the origin to "
                "RAGRAIL_GATEWAY_CORS_ORIGINS if it is yours",
                "ForbiddenOrigin",
            )
        content_type = headers.get(b"content-type", b"").lower()
        if not content_type.startswith(_SIMPLE_TYPES):
            return None  # JSON and other types need a preflight a foreign page cannot pass
        site = headers.get(b"sec-fetch-site", b"").lower()
        if site in (b"cross-site", b"same-site"):
            return (
                403,
                "cross-site form post refused: a page at another origin may not change this "
                "gateway's data",
                "ForbiddenOrigin",
            )
        if self.require_header and not any(h in headers for h in _CUSTOM_HEADERS):
            return (
                403,
                "form posts must carry an 'X-Requested-With' header or an API key "
                "(RAGRAIL_GATEWAY_CSRF_REQUIRE_HEADER)",
                "ForbiddenOrigin",
            )
        return None
