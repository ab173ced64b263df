"""`custom_data.ragrail.max_urls`: how many links a message may hold."""

from __future__ import annotations

from pydantic import Field

from services.guardrails.rails.base import RailSettings


class MaxUrlsSettings(RailSettings):
    # A message with more links than this is blocked (0: any link blocks).
    max_urls: int = Field(3, ge=0)
