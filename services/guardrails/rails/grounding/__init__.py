"""Groundedness: each answer sentence scored against the retrieved context."""

from pathlib import Path

from services.guardrails.rails.base import Flow, Rail
from services.guardrails.rails.grounding.actions import load
from services.guardrails.rails.grounding.settings import GroundingSettings

RAIL = Rail(
    name="grounding",
    settings=GroundingSettings,
    flows=(
        Flow(
            "ragrail grounding",
            "output",
            "ragrail_grounding",
            {
                "text": "$bot_message",
                "passages": "$ragrail_context",
                "grounded": "$ragrail_grounded",
            },
            speculative=True,
        ),
    ),
    load=load,
    folder=Path(__file__).parent,
)
