"""The images' HEALTHCHECK: is the service this container runs answering?

- a gRPC service: grpc.health.v1 Check on the port its settings resolve to (environment,
  RAGRAIL_CONFIG or default) is SERVING;
- the gateway: GET /v1/health answers 200 or 503. That is liveness on purpose: 503 means a
  peer is down, and a gateway restarted for that would come back no better.

Which service: the `python -m services.<name>` process in this container (its main process,
or a child of an init), so one script serves every image. Exit 0 healthy, 1 not.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

TIMEOUT_S = 4.0
MODULE = re.compile(rb"-m\x00services\.(\w+)")


def running_service() -> str:
    for cmdline in sorted(Path("/proc").glob("[0-9]*/cmdline"), key=lambda p: int(p.parent.name)):
        try:
            match = MODULE.search(cmdline.read_bytes())
        except OSError:  # the process ended while we looked
            continue
        if match:
            return match[1].decode()
    raise SystemExit("no `python -m services.<name>` process in this container")


def settings_of(service: str):  # type: ignore[no-untyped-def]
    from shared.settings import RagrailSettings

    module = importlib.import_module(f"services.{service}.settings")
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and issubclass(value, RagrailSettings)
            and value.__module__ == module.__name__
            and value.service_name == service
        ):
            return value()
    raise SystemExit(f"services.{service}.settings defines no settings class")


def gateway_alive(port: int) -> bool:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    connection.request("GET", "/v1/health")
    return connection.getresponse().status in (200, 503)


def grpc_serving(port: int) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    target = f"127.0.0.1:{port}"
    try:  # with TLS on (RAGRAIL_GRPC_*), the probe speaks TLS too; health needs no token
        from shared.grpc_security import GrpcSecuritySettings, channel_credentials

        security = GrpcSecuritySettings()
        credentials = channel_credentials(security) if security.tls else None
    except ImportError:
        credentials = None
    if credentials is None:
        channel = grpc.insecure_channel(target)
    else:
        # The certificate names the service's DNS name, not 127.0.0.1.
        channel = grpc.secure_channel(
            target, credentials, options=[("grpc.ssl_target_name_override", "localhost")]
        )
    with channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=TIMEOUT_S
        )
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def main() -> int:
    service = running_service()
    port = settings_of(service).port
    try:
        healthy = gateway_alive(port) if service == "gateway" else grpc_serving(port)
    except Exception as exc:  # any failure to answer is "not healthy", said in docker inspect
        print(f"{service} on port {port}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"{service} on port {port}: {'healthy' if healthy else 'not serving'}")
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
