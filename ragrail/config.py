"""The suite's YAML config file (RAGRAIL_CONFIG) checked before anything starts.

`ragrail up --config FILE` and `bench/answers.py --config FILE` hand the file to every
service as RAGRAIL_CONFIG; each service reads its own section (`generator:`, `embedder:`...,
shared/settings.py) and would otherwise find a mistake only when it starts, one service at a
time, in its log. Here every section is read by the settings class of the service it
configures, with the environment on top as the service will see it, and every mistake is
reported at once, naming the file, the section and the field.

The settings classes are imported only here, when a file is given: `ragrail up` without one
never imports a service.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from shared.settings import CONFIG_ENV

# Section -> the settings class that reads it ("module:Class").
SECTIONS: dict[str, str] = {
    "embedder": "services.embedder.settings:EmbedderSettings",
    "reranker": "services.reranker.settings:RerankerSettings",
    "retriever": "services.retriever.settings:RetrieverSettings",
    "generator": "services.generator.settings:GeneratorSettings",
    "guardrails": "services.guardrails.settings:GuardrailsSettings",
    "gateway": "services.gateway.settings:GatewaySettings",
    "grpc": "shared.grpc_security:GrpcSecuritySettings",
}


class ConfigError(ValueError):
    """A config file that no service would start with; the message lists every problem."""


def settings_class(section: str) -> type[Any]:
    module, _, name = SECTIONS[section].partition(":")
    return getattr(importlib.import_module(module), name)


def _problems(error: ValidationError, section: str) -> list[str]:
    out = []
    for e in error.errors():
        field = ".".join(str(p) for p in e["loc"]) or "(section)"
        out.append(f"{section}.{field}: {e['msg']}")
    return out


def check_config(path: Path) -> dict[str, Any]:
    """Each section of `path` as its service's settings class reads it (environment on top);
    raises ConfigError naming every bad section and field."""
    if not path.is_file():
        raise ConfigError(f"{path} is not a file; pass the path of a YAML config")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections (generator:, embedder:...)")
    problems = [
        f"unknown section {name!r} (the suite's: {', '.join(SECTIONS)})"
        for name in data
        if name not in SECTIONS
    ]
    checked: dict[str, Any] = {}
    saved = os.environ.get(CONFIG_ENV)
    os.environ[CONFIG_ENV] = str(path)
    try:
        for section in (s for s in SECTIONS if s in data):
            if not isinstance(data[section], dict):
                problems.append(f"{section}: expected a mapping of setting: value")
                continue
            try:
                checked[section] = settings_class(section)()
            except ValidationError as exc:
                problems.extend(_problems(exc, section))
    finally:
        if saved is None:
            os.environ.pop(CONFIG_ENV, None)
        else:
            os.environ[CONFIG_ENV] = saved
    if problems:
        raise ConfigError(f"{path}:\n  " + "\n  ".join(problems))
    return checked
