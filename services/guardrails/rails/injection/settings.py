"""`custom_data.ragrail.injection`: the prompt-injection classifier's thresholds."""

from __future__ import annotations

from pydantic import Field

from services.guardrails.rails.base import RailSettings


class InjectionSettings(RailSettings):
    # Empty: the threshold the trainer chose (head.json). A logit: higher flags less.
    threshold: float | None = None
    # For retrieved chunks. Empty: head.json's retrieval_threshold (calibrated on benign
    # documents), else the prompt threshold.
    retrieval_threshold: float | None = None
    # Retrieved chunks are scored in windows of about this many characters.
    window_chars: int = Field(500, ge=50)
