"""`custom_data.ragrail.deny_list`: regular expressions that block a message."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from services.guardrails.rails.base import RailSettings


class DenyPatternSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Named in the reason; empty: the pattern itself.
    name: str = ""
    # A Python regular expression, matched case-insensitively anywhere in the message.
    pattern: str


class DenyListSettings(RailSettings):
    patterns: list[DenyPatternSettings] = []
