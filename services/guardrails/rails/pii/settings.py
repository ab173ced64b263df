"""`custom_data.ragrail.pii`: which entities, and mask or block per stage."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from services.guardrails.rails.base import RailSettings
from services.guardrails.rails.pii.presidio import DEFAULT_ENTITIES


class PiiSettings(RailSettings):
    entities: list[str] = list(DEFAULT_ENTITIES)
    score_threshold: float = Field(0.3, ge=0, le=1)
    # ragrail's broader patterns next to Presidio's: cards of any issuer (Luhn-checked) and
    # phone numbers in formats `phonenumbers` validates for no region.
    extended_recognizers: bool = True
    input_action: Literal["mask", "block"] = "mask"
    output_action: Literal["mask", "block"] = "mask"
    # A chunk with sensitive data is redacted (masked) or dropped.
    retrieval_action: Literal["mask", "drop"] = "mask"
