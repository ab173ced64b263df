"""The `custom_data.ragrail` section of config/config.yml: what each ragrail rail does. Typed,
so a misspelt key or a bad value stops the service at startup with the field named."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

OnError = Literal["block", "allow"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # A rail that raises blocks ("block", fail closed) or lets the text through ("allow",
    # fail open); either way the answer reports it as errored.
    on_error: OnError = "block"


class InjectionConfig(_Section):
    # Empty: the threshold the trainer chose (head.json). A logit: higher flags less.
    threshold: float | None = None
    # For retrieved chunks. Empty: head.json's retrieval_threshold (calibrated on benign
    # documents), else the prompt threshold.
    retrieval_threshold: float | None = None
    # Retrieved chunks are scored in windows of about this many characters.
    window_chars: int = Field(500, ge=50)


class PiiConfig(_Section):
    entities: list[str] = [
        "EMAIL_ADDRESS",
        "PHONE_NUMBER",
        "CREDIT_CARD",
        "IBAN_CODE",
        "US_SSN",
        "IP_ADDRESS",
    ]
    score_threshold: float = Field(0.3, ge=0, le=1)
    # ragrail's broader patterns next to Presidio's: cards of any issuer (Luhn-checked) and
    # phone numbers in formats `phonenumbers` validates for no region.
    extended_recognizers: bool = True
    input_action: Literal["mask", "block"] = "mask"
    output_action: Literal["mask", "block"] = "mask"
    # A chunk with sensitive data is redacted (masked) or dropped.
    retrieval_action: Literal["mask", "drop"] = "mask"


class TopicEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    examples: list[str]


class TopicsConfig(_Section):
    allowed: list[TopicEntry] = []
    denied: list[TopicEntry] = []
    allowed_threshold: float = Field(0.3, ge=-1, le=1)
    denied_threshold: float = Field(0.6, ge=-1, le=1)


class LimitsConfig(_Section):
    max_chars: int = Field(8000, ge=1)
    max_lines: int = Field(400, ge=1)
    hidden_chars: Literal["block", "strip"] = "block"


class DenyPatternConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = ""
    pattern: str


class DenyListConfig(_Section):
    patterns: list[DenyPatternConfig] = []


class GroundingConfig(_Section):
    # auto: the cross-encoder when one is found (see the service README), else embeddings.
    scorer: Literal["auto", "cross-encoder", "embedding"] = "auto"
    # Support below which a sentence counts as unsupported, per scorer.
    embedding_threshold: float = Field(0.7, ge=-1, le=1)
    cross_encoder_threshold: float = Field(0.5, ge=0, le=1)
    min_supported: float = Field(1.0, ge=0, le=1)
    action: Literal["block", "annotate"] = "block"
    window_chars: int = Field(300, ge=50)
    # Context sentences scored per answer sentence: those sharing the most content words.
    candidates: int = Field(4, ge=1, le=50)


class RagrailRails(BaseModel):
    model_config = ConfigDict(extra="forbid")
    injection: InjectionConfig = InjectionConfig()
    pii: PiiConfig = PiiConfig()
    topics: TopicsConfig = TopicsConfig()
    limits: LimitsConfig = LimitsConfig()
    deny_list: DenyListConfig = DenyListConfig()
    grounding: GroundingConfig = GroundingConfig()
