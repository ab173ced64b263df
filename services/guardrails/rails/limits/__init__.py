"""Limits: too long, too many lines, or characters people cannot see."""

from pathlib import Path

from services.guardrails.rails.base import input_rail
from services.guardrails.rails.limits.actions import load
from services.guardrails.rails.limits.settings import LimitsSettings

RAIL = input_rail("limits", LimitsSettings, load, Path(__file__).parent)
