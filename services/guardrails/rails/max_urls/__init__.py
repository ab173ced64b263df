"""Max URLs: blocks a message with more than `max_urls` links. Off by default: add
`ragrail max urls` to rails.input.flows in config.yml (docs/adding-a-rail.md builds it)."""

from pathlib import Path

from services.guardrails.rails.base import Flow, Rail
from services.guardrails.rails.max_urls.actions import load
from services.guardrails.rails.max_urls.settings import MaxUrlsSettings

RAIL = Rail(
    name="max_urls",
    settings=MaxUrlsSettings,
    flows=(Flow("ragrail max urls", "input", "ragrail_max_urls"),),
    load=load,
    folder=Path(__file__).parent,
)
