"""grpc.aio server bootstrap every service runs: health, reflection, metrics, errors, shutdown.

A service supplies its settings and an async `build` function that loads its models and
returns the servicers to register; `run_service` does the rest. Models load before the port
opens, so a SERVING health status means the service can answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection
from opentelemetry import trace

from shared import metrics
from shared.errors import RagrailError
from shared.grpc_security import (
    Continuation,
    GrpcSecuritySettings,
    TokenAuthInterceptor,
    server_credentials,
)
from shared.logging import configure_logging
from shared.settings import ServiceSettings
from shared.tracing import incoming_context, setup_tracing, shutdown_tracing, tracer

log = logging.getLogger("ragrail.server")
T = TypeVar("T")


@dataclass
class ServiceSpec:
    """One gRPC service to register: its full name (for health and reflection) and servicer."""

    full_name: str
    servicer: Any
    add_to_server: Callable[[Any, grpc.aio.Server], None]

    @classmethod
    def of(
        cls, proto: Any, servicer: Any, add_to_server: Callable[[Any, grpc.aio.Server], None]
    ) -> ServiceSpec:
        """The one service a ragrail *_pb2 module defines, served by `servicer`."""
        (service,) = proto.DESCRIPTOR.services_by_name.values()
        return cls(service.full_name, servicer, add_to_server)


@dataclass
class Built:
    """What a service's `build` returns: servicers, and what to close on shutdown."""

    specs: list[ServiceSpec]
    close: Callable[[], Awaitable[None] | None] | None = None
    ready_message: dict[str, Any] = field(default_factory=dict)


class BlockingRunner:
    """Runs blocking model or database work off the event loop, on a bounded thread pool."""

    def __init__(self, workers: int, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, lambda: fn(*args))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def request_id(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "x-request-id":
            return str(value)
    return uuid.uuid4().hex[:16]


class ErrorsAndMetricsInterceptor(grpc.aio.ServerInterceptor):
    """Maps exceptions to statuses with safe messages, and records metrics and access logs."""

    def __init__(self, service: str) -> None:
        self.service = service

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        method = details.method.rsplit("/", 1)[-1]
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap_unary(handler.unary_unary, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap_stream(handler.unary_stream, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _wrap_unary(self, behavior: Callable[..., Any], method: str) -> Callable[..., Any]:
        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
            with self._observe(method, context) as outcome:
                try:
                    return await behavior(request, context)
                except Exception as exc:
                    await self._abort(exc, method, context, outcome)

        return wrapped

    def _wrap_stream(self, behavior: Callable[..., Any], method: str) -> Callable[..., Any]:
        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            with self._observe(method, context) as outcome:
                try:
                    async for item in behavior(request, context):
                        yield item
                except Exception as exc:
                    await self._abort(exc, method, context, outcome)

        return wrapped

    @contextlib.contextmanager
    def _observe(self, method: str, context: grpc.aio.ServicerContext) -> Any:
        outcome = {"code": grpc.StatusCode.OK}
        start = time.perf_counter()
        metrics.GRPC_IN_FLIGHT.labels(self.service).inc()
        # Not made current: a streaming handler's yields would detach it in another context.
        span = tracer.start_span(
            f"{self.service}/{method}",
            context=incoming_context(context.invocation_metadata()),
            kind=trace.SpanKind.SERVER,
            attributes={"rpc.system": "grpc", "rpc.service": self.service, "rpc.method": method},
        )
        try:
            yield outcome
        except asyncio.CancelledError:
            outcome["code"] = grpc.StatusCode.CANCELLED
            metrics.GRPC_CANCELLED.labels(self.service, method).inc()
            raise
        finally:
            elapsed = time.perf_counter() - start
            code = outcome["code"].name
            span.set_attribute("rpc.grpc.status_code", outcome["code"].value[0])
            if code != "OK":
                span.set_status(trace.StatusCode.ERROR, code)
            span.end()
            metrics.GRPC_IN_FLIGHT.labels(self.service).dec()
            metrics.GRPC_REQUESTS.labels(self.service, method, code).inc()
            metrics.GRPC_LATENCY.labels(self.service, method).observe(elapsed)
            if code != "OK":
                metrics.GRPC_ERRORS.labels(self.service, method, code).inc()
            if not method.startswith(("Check", "Watch", "ServerReflectionInfo")) or code != "OK":
                log.info(
                    "rpc",
                    extra={
                        "method": method,
                        "code": code,
                        "ms": round(elapsed * 1000, 2),
                        "request_id": request_id(context),
                    },
                )

    async def _abort(
        self, exc: Exception, method: str, context: grpc.aio.ServicerContext, outcome: dict
    ) -> None:
        if isinstance(exc, grpc.aio.AbortError):
            outcome["code"] = context.code() or grpc.StatusCode.UNKNOWN
            raise exc
        if isinstance(exc, RagrailError):
            outcome["code"] = exc.grpc_code
            await context.abort(exc.grpc_code, exc.message)
        rid = request_id(context)
        log.exception("unhandled error", extra={"method": method, "request_id": rid})
        outcome["code"] = grpc.StatusCode.INTERNAL
        await context.abort(
            grpc.StatusCode.INTERNAL,
            f"internal error in {self.service}.{method} (request id {rid}); the service log has "
            "the details",
        )


async def serve(settings: ServiceSettings, build: Callable[[], Awaitable[Built]]) -> None:
    """Loads the service, serves until SIGTERM/SIGINT, then drains in-flight calls and exits."""
    service = settings.service_name
    started = time.perf_counter()
    # Security settings first: a misnamed certificate should stop the service before it
    # spends a minute loading models.
    security = GrpcSecuritySettings()
    credentials = server_credentials(security)
    token = security.shared_token()
    built = await build()
    max_bytes = settings.max_message_mb * 1024 * 1024
    interceptors: list[grpc.aio.ServerInterceptor] = []
    if token:

        def rejected(method: str) -> None:
            name = method.rsplit("/", 1)[-1]
            metrics.GRPC_AUTH_REJECTED.labels(service, name).inc()
            log.warning("rpc rejected", extra={"method": name, "code": "UNAUTHENTICATED"})

        interceptors.append(TokenAuthInterceptor(token, rejected))
    interceptors.append(ErrorsAndMetricsInterceptor(service))
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            ("grpc.max_send_message_length", max_bytes),
            ("grpc.max_receive_message_length", max_bytes),
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=settings.max_concurrent_rpcs,
    )
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    for spec in built.specs:
        spec.add_to_server(spec.servicer, server)
    names = [spec.full_name for spec in built.specs]
    if security.reflection:
        reflection.enable_server_reflection(
            [
                *names,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ],
            server,
        )
    address = f"{settings.host}:{settings.port}"
    taken = (
        f"{service}: cannot bind {address}: another process holds the port; stop it or choose "
        f"another with RAGRAIL_{service.upper()}_PORT"
    )
    try:
        port = (
            server.add_secure_port(address, credentials)
            if credentials is not None
            else server.add_insecure_port(address)
        )
    except RuntimeError as err:  # grpcio raises where older releases returned 0
        raise SystemExit(f"{taken} ({err})") from None
    if port == 0:
        raise SystemExit(taken)
    await server.start()
    try:
        metrics_port = (
            metrics.start_metrics_server(settings.host, settings.metrics_port)
            if settings.metrics_port >= 0
            else -1
        )
    except OSError as err:
        await server.stop(None)
        raise SystemExit(
            f"{service}: cannot serve metrics on {settings.host}:{settings.metrics_port}: "
            f"{err.strerror}; stop the process holding it or choose another port with "
            f"RAGRAIL_{service.upper()}_METRICS_PORT (-1: no metrics server)"
        ) from None
    for name in ["", *names]:
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info(
        "serving",
        extra={
            "grpc_port": port,
            "metrics_port": metrics_port,
            "address": f"{settings.host}:{port}",
            "tls": credentials is not None,
            "mtls": bool(security.tls_client_ca_file),
            "token_auth": bool(token),
            "startup_s": round(time.perf_counter() - started, 2),
            **built.ready_message,
        },
    )

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down", extra={"grace_s": settings.shutdown_grace_s})
    await health.enter_graceful_shutdown()
    await server.stop(settings.shutdown_grace_s)
    if built.close is not None:
        result = built.close()
        if asyncio.iscoroutine(result):
            await result
    log.info("stopped")


# Tasks started by SIGHUP handlers: the loop keeps only weak references to tasks.
_sighup_tasks: set[asyncio.Task[Any]] = set()


def on_sighup(reload: Callable[[], Awaitable[Any]]) -> None:
    """Runs `reload()` as a task of the running loop on each SIGHUP (whose default would end
    the process): how a service switches models or rails without a restart."""
    loop = asyncio.get_running_loop()

    def start() -> None:
        task = loop.create_task(reload())  # type: ignore[arg-type]
        _sighup_tasks.add(task)
        task.add_done_callback(_sighup_tasks.discard)

    loop.add_signal_handler(signal.SIGHUP, start)


def run_service(settings: ServiceSettings, build: Callable[[], Awaitable[Built]]) -> None:
    """Entry point of a service's `__main__`: logging, then `serve` until a signal arrives."""
    configure_logging(settings.service_name, settings.log_level, settings.log_format)
    setup_tracing(settings.service_name)
    try:
        asyncio.run(serve(settings, build))
    except RagrailError as exc:
        log.error("cannot start: %s", exc.message)
        raise SystemExit(2) from None
    finally:
        shutdown_tracing()
