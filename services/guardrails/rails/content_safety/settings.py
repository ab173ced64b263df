"""`custom_data.ragrail.content_safety`: the unsafe-content head's thresholds and which
hazard categories block."""

from __future__ import annotations

from pydantic import Field

from services.guardrails.rails.base import RailSettings


class ContentSafetySettings(RailSettings):
    # Empty: the threshold the trainer chose on held-out benign text (guard.json). A logit:
    # higher blocks less.
    threshold: float | None = None
    # For answers. Empty: the same as for user messages.
    output_threshold: float | None = None
    # Hazard categories that block (content_safety/LABELS.md: violent_crimes, weapons_cbrne,
    # suicide_self_harm, ...). Empty: every category. An unsafe text whose most likely
    # category is not listed passes, its category reported.
    categories: list[str] = []
    # Answers are scored in windows of about this many characters (the worst one decides).
    window_chars: int = Field(500, ge=50)
