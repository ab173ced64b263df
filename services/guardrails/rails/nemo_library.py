"""NeMo Guardrails' own library flows that the direct engine can run too. The nemo engine
runs them from NeMo Guardrails' library as they are (its flows, its actions, its settings
under config.yml `rails.config`); these specs only tell the direct engine which action a
flow executes. A library flow not listed here is refused by the direct engine."""

from __future__ import annotations

from functools import partial
from typing import Any

from services.guardrails.rails.base import Flow, LoadedRail, Rail, Resources


def load_injection_detection(settings: Any, resources: Resources) -> LoadedRail:
    from nemoguardrails.library.injection_detection.actions import injection_detection

    # Its settings are rails.config.injection_detection, read from the config on each call.
    action = partial(injection_detection, config=resources.rails_config)
    return LoadedRail({"injection_detection": action})


# YARA rules for injection in answers (template injection, markdown XSS, ...).
INJECTION_DETECTION = Rail(
    name="injection_detection",
    settings=None,
    flows=(Flow("injection detection", "output", "injection_detection"),),
    load=load_injection_detection,
    from_nemo=True,
)
