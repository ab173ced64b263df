"""What a check answers, independent of the engine that ran it."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.verdict import Verdict


@dataclass
class Activation:
    rail: str
    verdict: Verdict
    reason: str = ""
    ms: float = 0.0
    errored: bool = False


@dataclass
class Check:
    verdict: Verdict = Verdict.ALLOW
    rail: str = ""
    reason: str = ""
    text: str = ""
    activations: list[Activation] = field(default_factory=list)
    ms: float = 0.0


def decide(original: str, final: str, activations: list[Activation]) -> Check:
    """The answer from the rails that ran: the first block decides; otherwise every rail
    that changed the text is named; otherwise allow."""
    blocked = next((a for a in activations if a.verdict == Verdict.BLOCK), None)
    if blocked is not None:
        return Check(Verdict.BLOCK, blocked.rail, blocked.reason, "", activations)
    changed = [a for a in activations if a.verdict == Verdict.MODIFY]
    if changed and final != original:
        return Check(
            Verdict.MODIFY,
            ", ".join(a.rail for a in changed),
            "; ".join(a.reason for a in changed if a.reason),
            final,
            activations,
        )
    errored = [a for a in activations if a.errored]
    reason = "; ".join(f"{a.rail}: {a.reason}" for a in errored)
    return Check(Verdict.ALLOW, "", reason, "", activations)
