"""Content safety: the guard model's unsafe head (with its hazard category) on the user's
message and on the answer."""

from pathlib import Path

from services.guardrails.rails.base import Flow, Rail
from services.guardrails.rails.content_safety.actions import load
from services.guardrails.rails.content_safety.settings import ContentSafetySettings

RAIL = Rail(
    name="content_safety",
    settings=ContentSafetySettings,
    flows=(
        Flow.with_source("ragrail content safety", "input", "ragrail_content_safety"),
        # On the answer the head runs uncached (its windows), so it can start with the check;
        # on the message it fills the cache the injection and topic rails read.
        Flow.with_source(
            "ragrail content safety on output", "output", "ragrail_content_safety", speculative=True
        ),
    ),
    load=load,
    needs="guard",
    folder=Path(__file__).parent,
)
