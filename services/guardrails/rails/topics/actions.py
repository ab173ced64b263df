"""Topic control: allowed and denied topics from the config, each a few example sentences,
matched by cosine similarity of sentence embeddings (NeMo Guardrails' configured embedding
model). A message closer than `denied_threshold` to a denied topic's example is blocked; with
allowed topics configured, a message that is not within `allowed_threshold` of any of them
is blocked as off-topic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from services.guardrails.rails.base import Embed, LoadedRail, Outcome, Resources, guarded
from services.guardrails.rails.topics.settings import TopicsSettings
from shared.errors import FailedPrecondition


@dataclass
class Topic:
    name: str
    vectors: np.ndarray  # (examples, dimension), unit length


def _topics(entries: list[dict], embed: Embed, kind: str) -> list[Topic]:
    topics = []
    for i, entry in enumerate(entries):
        name = str(entry.get("name") or f"{kind} topic {i}")
        examples = [str(e) for e in entry.get("examples") or [] if str(e).strip()]
        if not examples:
            raise FailedPrecondition(f"{kind} topic '{name}' has no examples to match against")
        topics.append(Topic(name, _unit(embed(examples))))
    return topics


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)


class TopicRail:
    def __init__(
        self,
        embed: Embed,
        allowed: list[dict],
        denied: list[dict],
        allowed_threshold: float,
        denied_threshold: float,
    ) -> None:
        self.embed = embed
        self.allowed = _topics(allowed, embed, "allowed")
        self.denied = _topics(denied, embed, "denied")
        self.allowed_threshold = allowed_threshold
        self.denied_threshold = denied_threshold

    @staticmethod
    def _best(vector: np.ndarray, topics: list[Topic]) -> tuple[str, float]:
        scores = [(t.name, float((t.vectors @ vector).max())) for t in topics]
        return max(scores, key=lambda s: s[1]) if scores else ("", -1.0)

    def check_vector(self, vector: np.ndarray) -> Outcome:
        """The verdict for one message's embedding (the input rails compute it once)."""
        vector = _unit(vector[None, :])[0]
        name, score = self._best(vector, self.denied)
        if name and score >= self.denied_threshold:
            return Outcome(
                "block",
                f"denied topic '{name}' (similarity {score:.2f} >= {self.denied_threshold})",
                details={"topic": name, "similarity": round(score, 4)},
            )
        if not self.allowed:
            return Outcome(details={"denied_similarity": round(score, 4)})
        name, score = self._best(vector, self.allowed)
        if score < self.allowed_threshold:
            return Outcome(
                "block",
                f"off-topic: closest allowed topic '{name}' at similarity {score:.2f} "
                f"< {self.allowed_threshold}",
                details={"topic": name, "similarity": round(score, 4)},
            )
        return Outcome(details={"topic": name, "similarity": round(score, 4)})

    def check(self, text: str) -> Outcome:
        return self.check_vector(self.embed([text])[0])


def load(settings: TopicsSettings, resources: Resources) -> LoadedRail:
    vectors = resources.general_vectors
    rail = TopicRail(
        vectors,
        [t.model_dump() for t in settings.allowed],
        [t.model_dump() for t in settings.denied],
        settings.allowed_threshold,
        settings.denied_threshold,
    )

    async def ragrail_topics(text: str) -> dict[str, Any]:
        # Embedded ahead by an earlier rail (the injection rail, see Resources.embeds_ahead)
        # leaves only the similarity to compute: that runs inline.
        vector = vectors.cached(text)

        def run() -> Outcome:
            return rail.check_vector(vectors([text])[0] if vector is None else vector)

        return await guarded("topics", settings.on_error, run, inline=vector is not None)

    return LoadedRail({"ragrail_topics": ragrail_topics})
