"""`custom_data.ragrail.document_injection`: the planted-instruction head's threshold and
windows."""

from __future__ import annotations

from pydantic import Field

from services.guardrails.rails.base import RailSettings


class DocumentInjectionSettings(RailSettings):
    # Empty: the threshold the trainer chose so that at most 1% of held-out benign passages
    # of each document domain are dropped (guard.json). A logit: higher drops less.
    threshold: float | None = None
    # Chunks are scored in windows of about this many characters. Empty: the window the
    # model was trained and calibrated on (guard.json, 500).
    window_chars: int | None = Field(None, ge=50)
