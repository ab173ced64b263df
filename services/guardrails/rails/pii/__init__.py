"""Sensitive data (PII): Presidio's pattern recognizers, offline, on input, chunks and
output."""

from pathlib import Path

from services.guardrails.rails.base import Flow, Rail
from services.guardrails.rails.pii.actions import load
from services.guardrails.rails.pii.settings import PiiSettings

RAIL = Rail(
    name="pii",
    settings=PiiSettings,
    flows=(
        Flow(
            "ragrail mask pii on input",
            "input",
            "ragrail_pii",
            {"text": "$user_message", "source": "input"},
        ),
        Flow("ragrail chunk pii", "retrieval", "ragrail_chunk_pii", speculative=True),
        Flow(
            "ragrail mask pii on output",
            "output",
            "ragrail_pii",
            {"text": "$bot_message", "source": "output"},
            speculative=True,
        ),
    ),
    load=load,
    folder=Path(__file__).parent,
)
