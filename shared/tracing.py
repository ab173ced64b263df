"""OpenTelemetry traces, off unless asked for, configured by OpenTelemetry's own environment
variables so any collector works without ragrail-specific settings:

    OTEL_TRACES_EXPORTER=otlp      # or console (spans as JSON on stdout, i.e. the service log)
    OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318   # OTLP over HTTP/protobuf

Trace context crosses service boundaries as W3C `traceparent` gRPC metadata: clients inject
it (`outgoing_metadata`), servers continue it (`incoming_context`). With no exporter the API's
no-op tracer is used and a span costs next to nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

log = logging.getLogger("ragrail.tracing")
EXPORTERS = ("none", "console", "otlp")
tracer = trace.get_tracer("ragrail")


def setup_tracing(service: str) -> str:
    """Installs a tracer provider for `service` when OTEL_TRACES_EXPORTER names an exporter;
    returns the exporter in use ("none" when tracing is off)."""
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "none").strip().lower() or "none"
    if exporter_name not in EXPORTERS:
        raise SystemExit(
            f"OTEL_TRACES_EXPORTER={exporter_name!r} is not supported; use one of "
            f"{', '.join(EXPORTERS)}"
        )
    if exporter_name == "none":
        return exporter_name
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service)})
    provider = TracerProvider(resource=resource)
    if exporter_name == "console":
        # Simple (synchronous) processor: a span is in the log when its call returns.
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    log.info("tracing on", extra={"exporter": exporter_name})
    return exporter_name


def shutdown_tracing() -> None:
    """Flushes spans still buffered (OTLP batches) before the process exits."""
    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if shutdown is not None:
        shutdown()


def outgoing_metadata(metadata: Iterable[tuple[str, str]] = ()) -> tuple[tuple[str, str], ...]:
    """The call's metadata plus the current trace context (`traceparent`), unless the caller
    already put one there."""
    metadata = tuple(metadata)
    if any(key == "traceparent" for key, _ in metadata):
        return metadata
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return (*metadata, *carrier.items())


def incoming_context(metadata: Iterable[tuple[str, str | bytes]] | None) -> otel_context.Context:
    """The trace context a caller sent in gRPC metadata or HTTP headers."""
    carrier = {k.lower(): v if isinstance(v, str) else v.decode() for k, v in metadata or ()}
    return propagate.extract(carrier)
