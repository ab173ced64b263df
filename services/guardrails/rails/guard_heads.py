"""What the rails on the guard model share (injection, content safety, document injection):
finding the loaded model, a head's threshold (config.yml overrides guard.json), and the
verdict a head gives a score. The model is loaded once for the service (Resources.guard),
behind a cache of recent texts, so the input rails that read the same message run the
graph once between them."""

from __future__ import annotations

from services.guardrails.rails.base import Outcome, Resources
from shared.errors import FailedPrecondition
from shared.models.guard import TRAIN_HINT, ScoreCache


def guard_of(resources: Resources, rail: str) -> ScoreCache:
    """The service's guard model; a rail that needs it and finds none stops startup."""
    guard = getattr(resources, "guard", None)
    if guard is None:
        raise FailedPrecondition(
            f"the {rail} rail needs the guard model (guard.json under models/guardrails/, or "
            f"RAGRAIL_GUARDRAILS_GUARD_MODEL); {TRAIN_HINT}"
        )
    return guard  # type: ignore[no-any-return]


def threshold(guard: ScoreCache, head: str, setting: float | None) -> float:
    return guard.model.head(head).threshold if setting is None else float(setting)


def verdict(score: float, limit: float, reason: str, **details: object) -> Outcome:
    """Block with `reason` (and the score against the threshold) when score >= limit."""
    info = {"score": round(score, 4), "threshold": round(limit, 4), **details}
    if score >= limit:
        return Outcome(
            "block", f"{reason} (classifier logit {score:.2f} >= {limit:.2f})", details=info
        )
    return Outcome(details=info)
