"""Instructions planted in retrieved documents: the guard model's document head, per chunk,
in windows; an injected chunk is dropped."""

from pathlib import Path

from services.guardrails.rails.base import Flow, Rail
from services.guardrails.rails.document_injection.actions import load
from services.guardrails.rails.document_injection.settings import DocumentInjectionSettings

RAIL = Rail(
    name="document_injection",
    settings=DocumentInjectionSettings,
    flows=(
        Flow(
            "ragrail document injection",
            "retrieval",
            "ragrail_document_injection",
            speculative=True,
        ),
    ),
    load=load,
    needs="guard",
    folder=Path(__file__).parent,
)
