"""The suite's services as a whole: their names in start order, and where each listens.

`ragrail up` starts them from this, without importing any service: each service's own
settings class reads the same variables (RAGRAIL_<SERVICE>_HOST, _PORT) and YAML section,
and validates all its other settings when it starts. Default ports: shared.settings.
"""

from __future__ import annotations

from functools import cache
from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.settings import DEFAULT_PORTS, RagrailSettings, ServiceSettings, port_field

# In start order: the gateway last, since it needs the others to answer.
SERVICES = ("embedder", "retriever", "reranker", "generator", "guardrails", "gateway")
# gRPC services; the gateway speaks HTTP.
HTTP_SERVICES = ("gateway",)


class Endpoint(RagrailSettings):
    """A service's host and port, read as the service reads them."""

    model_config = SettingsConfigDict(extra="ignore")

    host: str = Field(ServiceSettings.model_fields["host"].default)
    port: int


@cache
def _endpoint_class(service: str) -> type[Endpoint]:
    if service not in DEFAULT_PORTS:
        raise KeyError(f"unknown service {service!r}; the suite's: {sorted(DEFAULT_PORTS)}")

    class ServiceEndpoint(Endpoint):
        service_name: ClassVar[str] = service
        model_config = SettingsConfigDict(env_prefix=f"RAGRAIL_{service.upper()}_", extra="ignore")

        port: int = port_field(DEFAULT_PORTS[service][0])

    return ServiceEndpoint


def endpoint(service: str) -> Endpoint:
    """Where `service` listens, from RAGRAIL_<SERVICE>_HOST/_PORT, its YAML section, or the
    defaults."""
    return _endpoint_class(service)()
