"""Typed settings shared by every service: environment variables over a YAML file over defaults.

Each gRPC service's settings class derives from `ServiceSettings.of("<service>")`, which sets
its `service_name`, env prefix and default ports; the gateway's derives from `ServerSettings`,
the part it shares with them, and sets those itself. A service's fields are read from
`RAGRAIL_<SERVICE>_<FIELD>` (e.g. `RAGRAIL_EMBEDDER_PORT=50051`) and from the `<service>:`
section of the YAML file named by `RAGRAIL_CONFIG`, if any. Precedence: explicit arguments,
then environment, then YAML, then the defaults written here, which work offline on a laptop.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

import yaml
from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

CONFIG_ENV = "RAGRAIL_CONFIG"

# Default loopback ports of the suite; compose and `ragrail up` use the same numbers.
DEFAULT_PORTS: dict[str, tuple[int, int]] = {
    # service: (gRPC or HTTP port, Prometheus metrics port)
    "embedder": (50051, 9151),
    "reranker": (50052, 9152),
    "retriever": (50053, 9153),
    "guardrails": (50054, 9154),
    "generator": (50055, 9155),
    "gateway": (8080, 8080),
}


def read_yaml_section(section: str, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The `section:` mapping of the suite's YAML config, or {} when there is no file or section."""
    path = path or os.environ.get(CONFIG_ENV)
    if not path:
        return {}
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(
            f"{CONFIG_ENV}={path} does not name a file; fix the path or unset it"
        )
    data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of service sections at the top level")
    values = data.get(section) or {}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: section '{section}' must be a mapping of setting: value")
    return values


class _YamlSection(InitSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], section: str) -> None:
        super().__init__(settings_cls, read_yaml_section(section))


def port_field(default: int, what: str = "gRPC port") -> Any:
    """A validated port setting; subclasses use it so overriding a default keeps the checks."""
    return Field(default, ge=0, le=65535, description=f"{what}; 0 picks a free one.")


def metrics_port_field(default: int) -> Any:
    return Field(
        default,
        ge=-1,
        le=65535,
        description="Prometheus /metrics port; 0 picks a free one, -1 disables.",
    )


def timeout_field(default: float, description: str) -> Any:
    """A limit in seconds on a call or a wait; it must be positive (no 0 for "none")."""
    return Field(default, gt=0, description=description)


def retries_field(description: str) -> Any:
    """How often a failed call is retried (2; 0 to 10), each after a doubling backoff."""
    return Field(2, ge=0, le=10, description=description)


def retry_backoff_field(description: str) -> Any:
    """The wait before the first retry of `retries_field` (0.25 s), doubled for each next one."""
    return Field(0.25, ge=0, description=description)


class RagrailSettings(BaseSettings):
    """Base of every settings class: environment, then the YAML section named `service_name`."""

    service_name: ClassVar[str] = "ragrail"
    model_config = SettingsConfigDict(extra="forbid", validate_default=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _YamlSection(settings_cls, cls.service_name)


class ServerSettings(RagrailSettings):
    """What every ragrail server has, the gRPC services and the HTTP gateway alike: the
    interface it binds and how it logs."""

    host: str = Field("127.0.0.1", description="Interface to bind; 0.0.0.0 in containers.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Log level."
    )
    log_format: Literal["json", "text"] = Field(
        "json", description="json: one object per line; text: for people at a terminal."
    )


class ServiceSettings(ServerSettings):
    """Settings every gRPC service has. A service's class derives from `of(service)`."""

    port: int = port_field(0)
    metrics_port: int = metrics_port_field(0)
    max_message_mb: int = Field(64, ge=1, le=2047, description="Largest gRPC message accepted.")
    max_concurrent_rpcs: int = Field(
        256, ge=1, description="Calls beyond this get RESOURCE_EXHAUSTED."
    )
    shutdown_grace_s: float = Field(
        10.0, ge=0, description="In-flight calls get this long on SIGTERM."
    )
    workers: int = Field(
        2, ge=1, le=64, description="Threads running blocking model or database work."
    )

    @classmethod
    def of(cls, service: str) -> type[Self]:
        """`cls` as `service`'s settings: its `service_name` (the YAML section), the
        RAGRAIL_<SERVICE>_ env prefix and its DEFAULT_PORTS as the port defaults."""
        default_port, default_metrics_port = DEFAULT_PORTS[service]

        class Service(cls):  # type: ignore[valid-type, misc]
            service_name: ClassVar[str] = service
            model_config = service_config(service)

            port: int = port_field(default_port)
            metrics_port: int = metrics_port_field(default_metrics_port)

        Service.__name__ = Service.__qualname__ = f"{cls.__name__}.of({service!r})"
        return Service


def service_config(name: str) -> SettingsConfigDict:
    """model_config for a service's settings class: `RAGRAIL_<NAME>_` env prefix."""
    return SettingsConfigDict(
        env_prefix=f"RAGRAIL_{name.upper()}_", extra="forbid", validate_default=True
    )
