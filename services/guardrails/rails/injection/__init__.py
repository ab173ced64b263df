"""Prompt injection: the guard model's injection head (`python -m trainers.guardrails`) or
the single-head classifier (`python -m trainers.guardrails.baseline`), on the user's message
and, in windows, on retrieved chunks."""

from pathlib import Path

from services.guardrails.rails.base import Flow, Rail
from services.guardrails.rails.injection.actions import load
from services.guardrails.rails.injection.settings import InjectionSettings

__all__ = ["RAIL"]

RAIL = Rail(
    name="injection",
    settings=InjectionSettings,
    flows=(
        Flow("ragrail injection", "input", "ragrail_injection"),
        Flow("ragrail chunk injection", "retrieval", "ragrail_chunk_injection"),
    ),
    load=load,
    needs="classifier",
    folder=Path(__file__).parent,
)
