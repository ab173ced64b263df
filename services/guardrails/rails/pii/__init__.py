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
        Flow.with_source("ragrail mask pii on input", "input", "ragrail_pii"),
        Flow("ragrail chunk pii", "retrieval", "ragrail_chunk_pii", speculative=True),
        Flow.with_source("ragrail mask pii on output", "output", "ragrail_pii", speculative=True),
    ),
    load=load,
    folder=Path(__file__).parent,
)
