"""`custom_data.ragrail.limits`: length and character-set limits."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from services.guardrails.rails.base import RailSettings


class LimitsSettings(RailSettings):
    max_chars: int = Field(8000, ge=1)
    max_lines: int = Field(400, ge=1)
    # "block" refuses text with hidden characters; "strip" removes them and lets it through.
    hidden_chars: Literal["block", "strip"] = "block"
