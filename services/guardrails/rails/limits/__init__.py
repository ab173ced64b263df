"""Limits: too long, too many lines, or characters people cannot see."""

from pathlib import Path

from services.guardrails.rails.base import Flow, Rail
from services.guardrails.rails.limits.actions import load
from services.guardrails.rails.limits.settings import LimitsSettings

RAIL = Rail(
    name="limits",
    settings=LimitsSettings,
    flows=(Flow("ragrail limits", "input", "ragrail_limits"),),
    load=load,
    folder=Path(__file__).parent,
)
