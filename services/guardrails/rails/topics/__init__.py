"""Topic control: allowed and denied topics matched by sentence-embedding similarity."""

from pathlib import Path

from services.guardrails.rails.base import Flow, Rail
from services.guardrails.rails.topics.actions import load
from services.guardrails.rails.topics.settings import TopicsSettings

RAIL = Rail(
    name="topics",
    settings=TopicsSettings,
    flows=(Flow("ragrail topics", "input", "ragrail_topics", general_vectors=True),),
    load=load,
    folder=Path(__file__).parent,
)
