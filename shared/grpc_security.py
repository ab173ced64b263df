"""Transport security between the suite's services: optional TLS / mTLS and a shared token.

Plaintext gRPC with no authentication is the default, as is usual inside a cluster or on a
laptop where every port binds 127.0.0.1. One settings object, read by every server and every
client from the same `RAGRAIL_GRPC_` variables (or the `grpc:` section of the YAML config),
turns on:

- TLS: a server certificate and key; clients trust `tls_ca_file` (or the system roots).
- mTLS: additionally `tls_client_ca_file` on the server, which then requires a client
  certificate signed by that CA; clients present `tls_cert_file` / `tls_key_file`.
- A shared bearer token: every call must carry `authorization: Bearer <token>`; health checks
  and (unless turned off) reflection stay open so orchestrators' probes work without it.

Servers refuse to start when a file is named but cannot be read, rather than silently
falling back to plaintext.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import grpc
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.errors import FailedPrecondition
from shared.settings import RagrailSettings

# Health and reflection must answer probes that carry no token (kubelet's gRPC probe,
# `docker compose` healthchecks, grpcurl against a locked-down service).
OPEN_METHODS = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)


class GrpcSecuritySettings(RagrailSettings):
    """How services authenticate each other (`RAGRAIL_GRPC_*`, or `grpc:` in the YAML config)."""

    service_name: ClassVar[str] = "grpc"
    model_config = SettingsConfigDict(
        env_prefix="RAGRAIL_GRPC_", extra="forbid", validate_default=True
    )

    tls_cert_file: str = Field(
        "", description="Server: its certificate (PEM). Client: its certificate for mTLS."
    )
    tls_key_file: str = Field("", description="Private key (PEM) matching tls_cert_file.")
    tls_ca_file: str = Field(
        "", description="Client: CA bundle that signed the servers' certificates (PEM)."
    )
    tls_client_ca_file: str = Field(
        "", description="Server: require client certificates signed by this CA (mTLS)."
    )
    tls_server_name: str = Field(
        "", description="Client: name to check in the server certificate, if not the host."
    )
    token: str = Field("", description="Shared bearer token every call must carry.")
    token_file: str = Field("", description="File holding the token (a mounted secret).")
    reflection: bool = Field(True, description="Serve gRPC server reflection.")

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert_file or self.tls_ca_file)

    def shared_token(self) -> str:
        if self.token_file:
            return _read(self.token_file, "token_file").decode("utf-8").strip()
        return self.token


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise FailedPrecondition(
            f"RAGRAIL_GRPC_{what.upper()}={path} cannot be read ({exc.strerror}); fix the path "
            "or unset it"
        ) from None


def server_credentials(settings: GrpcSecuritySettings) -> grpc.ServerCredentials | None:
    """TLS (or mTLS) credentials for a server, or None for plaintext."""
    if not settings.tls_cert_file and not settings.tls_key_file:
        if settings.tls_client_ca_file:
            raise FailedPrecondition(
                "RAGRAIL_GRPC_TLS_CLIENT_CA_FILE needs RAGRAIL_GRPC_TLS_CERT_FILE and "
                "RAGRAIL_GRPC_TLS_KEY_FILE: mTLS runs over TLS"
            )
        return None
    if not (settings.tls_cert_file and settings.tls_key_file):
        raise FailedPrecondition(
            "set both RAGRAIL_GRPC_TLS_CERT_FILE and RAGRAIL_GRPC_TLS_KEY_FILE for TLS"
        )
    pair = (
        _read(settings.tls_key_file, "tls_key_file"),
        _read(settings.tls_cert_file, "tls_cert_file"),
    )
    client_ca = (
        _read(settings.tls_client_ca_file, "tls_client_ca_file")
        if settings.tls_client_ca_file
        else None
    )
    return grpc.ssl_server_credentials(
        [pair], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def channel_credentials(settings: GrpcSecuritySettings) -> grpc.ChannelCredentials | None:
    """TLS credentials for a client channel, or None for plaintext."""
    if not settings.tls:
        return None
    roots = _read(settings.tls_ca_file, "tls_ca_file") if settings.tls_ca_file else None
    key = _read(settings.tls_key_file, "tls_key_file") if settings.tls_key_file else None
    cert = _read(settings.tls_cert_file, "tls_cert_file") if settings.tls_cert_file else None
    return grpc.ssl_channel_credentials(
        root_certificates=roots, private_key=key, certificate_chain=cert
    )


def channel_options(settings: GrpcSecuritySettings) -> list[tuple[str, Any]]:
    if settings.tls and settings.tls_server_name:
        return [("grpc.ssl_target_name_override", settings.tls_server_name)]
    return []


def call_metadata(settings: GrpcSecuritySettings) -> tuple[tuple[str, str], ...]:
    """Metadata a client adds to every call: the bearer token, when one is configured."""
    token = settings.shared_token()
    return (("authorization", f"Bearer {token}"),) if token else ()


# What a server interceptor is given to call the rest of the chain (the next interceptor, then
# the method's handler).
Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]]


class TokenAuthInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls without the shared bearer token (UNAUTHENTICATED), except health/reflection."""

    def __init__(self, token: str, on_reject: Callable[[str], None] | None = None) -> None:
        self._expected = f"Bearer {token}".encode()
        self._on_reject = on_reject

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        if details.method.startswith(OPEN_METHODS):
            return await continuation(details)
        given = ""
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                given = value if isinstance(value, str) else value.decode("utf-8", "replace")
        if hmac.compare_digest(given.encode(), self._expected):
            return await continuation(details)
        if self._on_reject is not None:
            self._on_reject(details.method)
        reason = "missing" if not given else "wrong"
        handler = await continuation(details)
        return _rejecting(
            handler,
            f"{reason} bearer token: set RAGRAIL_GRPC_TOKEN (or "
            "RAGRAIL_GRPC_TOKEN_FILE) to the suite's shared token",
        )


def _rejecting(handler: grpc.RpcMethodHandler | None, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as `handler` that aborts with UNAUTHENTICATED."""

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # pragma: no cover - abort raises

    deserializer = getattr(handler, "request_deserializer", None)
    serializer = getattr(handler, "response_serializer", None)
    if handler is not None and handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=deserializer, response_serializer=serializer
        )
    return grpc.unary_unary_rpc_method_handler(
        unary, request_deserializer=deserializer, response_serializer=serializer
    )


class _AddMetadata(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Adds fixed metadata (the bearer token) to every call a channel makes."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        merged = (*tuple(details.metadata or ()), *self._metadata)
        return grpc.aio.ClientCallDetails(
            details.method,
            details.timeout,
            grpc.aio.Metadata(*merged),
            details.credentials,
            details.wait_for_ready,
        )

    async def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        return await continuation(self._details(details), request)

    async def intercept_unary_stream(self, continuation, details, request):  # type: ignore[no-untyped-def]
        return await continuation(self._details(details), request)


def secure_or_plain_channel(
    target: str, options: list[tuple[str, Any]], settings: GrpcSecuritySettings | None = None
) -> grpc.aio.Channel:
    """A client channel configured by the suite's security settings (plaintext by default)."""
    settings = settings or GrpcSecuritySettings()
    metadata = call_metadata(settings)
    interceptors = [_AddMetadata(metadata)] if metadata else None
    credentials = channel_credentials(settings)
    if credentials is None:
        return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)
    return grpc.aio.secure_channel(
        target,
        credentials,
        options=[*options, *channel_options(settings)],
        interceptors=interceptors,
    )
