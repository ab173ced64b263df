"""The checks behind the rails, each a small class with no NeMo Guardrails dependency.

Every check returns an Outcome; services/guardrails/actions.py wraps them as NeMo Guardrails
actions and the Colang flows in config/rails.co decide what a verdict does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Verdict = Literal["allow", "block", "modify"]


@dataclass
class Outcome:
    verdict: Verdict = "allow"
    reason: str = ""
    # The text to use instead, when verdict is "modify".
    text: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    errored: bool = False

    def as_dict(self) -> dict[str, Any]:
        """What an action returns to a Colang flow ($r.verdict, $r.text, ...)."""
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "text": self.text,
            "details": self.details,
            "errored": self.errored,
        }
