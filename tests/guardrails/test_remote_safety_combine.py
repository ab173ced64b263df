"""How the remote safety rail makes one verdict of the remote model's and the local guard
model's (services/guardrails/rails/remote_safety/actions.py `combine`): every `combine`
mode against every pair of verdicts, and every `on_error` when the remote gives none. In
process; the service runs the same function (tests/guardrails/test_remote_safety_service.py)."""

from __future__ import annotations

import pytest

from services.guardrails.rails.base import Outcome
from services.guardrails.rails.remote_safety.actions import Remote, combine
from shared.models.remote_safety import Judgement
from shared.models.safety_formats import SafetyVerdict
from shared.verdict import Verdict

SAFE = Remote(Judgement(SafetyVerdict(True), "safe", "guard", 12.0))
UNSAFE = Remote(
    Judgement(SafetyVerdict(False, ("S1",), ("Violent Crimes",)), "unsafe\nS1", "guard", 12.0)
)
MISSING = Remote(None, "the model server at http://x/v1 cannot be reached")
LOCAL_SAFE = Outcome(details={"score": -3.0})
LOCAL_UNSAFE = Outcome(Verdict.BLOCK, "unsafe request, category hate (hate)", details={})
A, B = Verdict.ALLOW, Verdict.BLOCK


# Each pair of verdicts, remote and local, and what `either` and `both` make of it.
PAIRS = [
    (SAFE, LOCAL_SAFE, {"either": A, "both": A}),
    (UNSAFE, LOCAL_SAFE, {"either": B, "both": A}),
    (SAFE, LOCAL_UNSAFE, {"either": B, "both": A}),
    (UNSAFE, LOCAL_UNSAFE, {"either": B, "both": B}),
]


@pytest.mark.parametrize(
    ("mode", "remote", "local", "expected"),
    [
        *(
            (mode, remote, local, by_mode[mode])
            for mode in ("either", "both")
            for remote, local, by_mode in PAIRS
        ),
        ("remote", SAFE, None, A),
        ("remote", UNSAFE, None, B),
        # No guard model loaded: the remote verdict alone, whatever the mode.
        ("both", UNSAFE, None, B),
        ("either", SAFE, None, A),
    ],
)
def test_combine_modes(mode: str, remote: Remote, local: Outcome | None, expected: Verdict) -> None:
    outcome = combine("request", mode, "block", remote, local)
    assert outcome.verdict == expected, outcome
    assert not outcome.errored
    assert outcome.details["remote"]["safe"] == (remote is SAFE)
    if expected == B and remote is UNSAFE:
        assert "per the remote safety model (guard): S1 Violent Crimes" in outcome.reason
    if expected == B and local is LOCAL_UNSAFE:
        assert "the local guard model: unsafe request, category hate" in outcome.reason


@pytest.mark.parametrize(
    ("on_error", "local", "expected", "says"),
    [
        ("block", LOCAL_SAFE, B, "failing closed (on_error: block)"),
        ("allow", LOCAL_UNSAFE, A, "failing open (on_error: allow)"),
        ("local", LOCAL_SAFE, A, "the local guard model found it safe (on_error: local)"),
        ("local", LOCAL_UNSAFE, B, "so the local verdict decided"),
        ("local", None, B, "no local guard model to decide instead, failing closed"),
    ],
)
def test_a_missing_remote_verdict_follows_on_error(
    on_error: str, local: Outcome | None, expected: Verdict, says: str
) -> None:
    outcome = combine("answer", "either", on_error, MISSING, local)
    assert outcome.verdict == expected, outcome
    assert outcome.errored
    assert says in outcome.reason
    assert "cannot be reached" in outcome.reason
    assert outcome.details["remote"] == {"error": MISSING.error}
