"""`custom_data.ragrail.grounding`: how an answer's support by its context is judged."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from services.guardrails.rails.base import RailSettings


class GroundingSettings(RailSettings):
    # auto: the cross-encoder when one is found (see the service README), else embeddings.
    scorer: Literal["auto", "cross-encoder", "embedding"] = "auto"
    # Support below which a sentence counts as unsupported, per scorer.
    embedding_threshold: float = Field(0.7, ge=-1, le=1)
    cross_encoder_threshold: float = Field(0.5, ge=0, le=1)
    # Share of answer sentences that must be supported.
    min_supported: float = Field(1.0, ge=0, le=1)
    action: Literal["block", "annotate"] = "block"
    window_chars: int = Field(300, ge=50)
    # Context sentences scored per answer sentence: those sharing the most content words.
    candidates: int = Field(4, ge=1, le=50)
