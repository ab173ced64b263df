"""`custom_data.ragrail.topics`: allowed and denied topics, each a few example sentences."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from services.guardrails.rails.base import RailSettings


class TopicEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    examples: list[str]


class TopicsSettings(RailSettings):
    # With `allowed` empty every topic not denied is allowed.
    allowed: list[TopicEntry] = []
    denied: list[TopicEntry] = []
    # Cosine similarity to a topic's closest example.
    allowed_threshold: float = Field(0.3, ge=-1, le=1)
    denied_threshold: float = Field(0.7, ge=-1, le=1)
