"""The NeMo Guardrails boundary of a rail's outcome (rails/base.py): what an action returns
to its Colang flow, and how the engines read every action's value back."""

from __future__ import annotations

from enum import Enum
from types import SimpleNamespace

from services.guardrails.rails.base import Outcome
from shared.verdict import Verdict


def test_an_outcome_goes_to_colang_as_plain_values_and_comes_back_whole() -> None:
    outcome = Outcome("modify", "masked EMAIL", "<EMAIL>", details={"spans": 1})
    assert outcome.verdict is Verdict.MODIFY
    value = outcome.action_value()
    assert type(value["verdict"]) is str and value["verdict"] == "modify"
    assert Outcome.of_action_value(value) == outcome


def test_nemo_library_outcomes_are_read_as_verdicts() -> None:
    decision = Enum("Decision", {"TRANSFORM": "transform"})
    value = SimpleNamespace(
        decision=decision.TRANSFORM, reason="", metadata={"text": "x", "detections": ["r"]}
    )
    outcome = Outcome.of_action_value(value)
    assert (outcome.verdict, outcome.text, outcome.reason) == (
        Verdict.MODIFY,
        "x",
        "YARA rules matched: r",
    )
    assert Outcome.of_action_value(None) == Outcome()
