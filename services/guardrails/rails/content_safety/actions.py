"""Content safety: the guard model's unsafe head on the user's message and on the answer. A
block names the hazard category (MLCommons AILuminate / Llama Guard taxonomy, as the
trainer's content_safety data labels it), so the refusal says what kind of harm it saw."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from services.guardrails.rails.base import LoadedRail, Outcome, Resources, guarded
from services.guardrails.rails.content_safety.settings import ContentSafetySettings
from services.guardrails.rails.guard_heads import guard_of, threshold, verdict
from shared.errors import FailedPrecondition
from shared.models.guard import ScoreCache
from shared.text import windows

# How a refusal names each category.
CATEGORY_NAMES = {
    "violent_crimes": "violent crimes",
    "nonviolent_crimes": "non-violent crimes",
    "sex_crimes": "sex-related crimes",
    "child_exploitation": "child sexual exploitation",
    "weapons_cbrne": "indiscriminate weapons (chemical, biological, radiological, nuclear, "
    "explosives)",
    "suicide_self_harm": "suicide and self-harm",
    "hate": "hate",
    "sexual_content": "sexual content",
    "privacy": "privacy",
    "defamation": "defamation",
    "specialized_advice": "specialized advice",
    "ip": "intellectual property",
    "elections": "elections",
    "other": "other hazards",
}


@dataclass
class ContentSafetyRail:
    guard: ScoreCache
    input_threshold: float
    output_threshold: float
    blocking: frozenset[str]  # empty: every category blocks
    window_chars: int

    def outcome(self, row: np.ndarray, limit: float, what: str) -> Outcome:
        model = self.guard.model
        category = model.category(row)
        score = float(row[model.head("unsafe").logit])
        name = CATEGORY_NAMES.get(category, category)
        result = verdict(
            score, limit, f"unsafe {what}, category {category} ({name})", category=category
        )
        if result.verdict == "block" and self.blocking and category not in self.blocking:
            result.details["not_blocked_category"] = True
            return Outcome(details=result.details)
        return result

    def check(self, text: str, source: str) -> Outcome:
        if source == "input":
            return self.outcome(self.guard([text]).logits[0], self.input_threshold, "request")
        # An answer can be long: its worst window decides.
        pieces = windows(text, self.window_chars)
        logits = self.guard.model.logits(pieces)
        worst = int(np.argmax(logits[:, self.guard.model.head("unsafe").logit]))
        return self.outcome(logits[worst], self.output_threshold, "answer")


def build(settings: ContentSafetySettings, resources: Resources) -> ContentSafetyRail:
    """The check, from its settings and the service's guard model (also what the remote
    safety rail combines its verdict with)."""
    guard = guard_of(resources, "content safety")
    names = guard.model.head("unsafe").config.get("categories", {}).get("names", [])
    unknown = sorted(set(settings.categories) - set(names))
    if unknown:
        raise FailedPrecondition(
            f"custom_data.ragrail.content_safety.categories: unknown {unknown}; the model's "
            f"categories are {names}"
        )
    input_threshold = threshold(guard, "unsafe", settings.threshold)
    output_threshold = (
        input_threshold if settings.output_threshold is None else settings.output_threshold
    )
    return ContentSafetyRail(
        guard,
        input_threshold,
        output_threshold,
        frozenset(settings.categories),
        settings.window_chars,
    )


def load(settings: ContentSafetySettings, resources: Resources) -> LoadedRail:
    rail = build(settings, resources)

    async def ragrail_content_safety(text: str, source: str = "input") -> dict[str, Any]:
        return await guarded("content safety", settings.on_error, lambda: rail.check(text, source))

    return LoadedRail(
        {"ragrail_content_safety": ragrail_content_safety},
        info={
            "content_safety_threshold": f"{rail.input_threshold:.4f}",
            "content_safety_output_threshold": f"{rail.output_threshold:.4f}",
        },
    )
