"""The chat's guardrails report is typed (shared/verdict.py's Verdict, a model per dropped or
redacted chunk) and its JSON is what clients read: plain strings, the same keys."""

from __future__ import annotations

import json

from services.gateway.chat.protocol import ChunkOutcome, GuardrailsReport, RailOutcome
from services.gateway.chat.stages.rails import withheld_text
from shared.verdict import Verdict


def test_the_report_serialises_to_plain_json() -> None:
    report = GuardrailsReport(
        enabled=True,
        input=RailOutcome(verdict=Verdict.ALLOW),
        retrieval=[
            ChunkOutcome(chunk_id="c1", verdict=Verdict.BLOCK, rail="injection", reason="x"),
            ChunkOutcome(chunk_id="c2", verdict="modify", rail="mask pii", reason=""),
        ],
    )
    expected = {
        "enabled": True,
        "input": {
            "verdict": "allow",
            "rail": "",
            "reason": "",
            "modified": False,
            "duration_ms": 0.0,
        },
        "retrieval": [
            {"chunk_id": "c1", "verdict": "block", "rail": "injection", "reason": "x"},
            {"chunk_id": "c2", "verdict": "modify", "rail": "mask pii", "reason": ""},
        ],
        "output": None,
    }
    assert json.loads(report.model_dump_json()) == expected
    # The stream's last chunk dumps the report with json.dumps (rag/responses.py).
    assert json.loads(json.dumps(report.model_dump())) == expected


def test_withheld_text_names_the_rails_that_dropped_the_sources() -> None:
    dropped = [ChunkOutcome(chunk_id="c1", verdict="block", rail="injection", reason="planted")]
    assert "withheld by the guardrails" in withheld_text(dropped)
    assert "injection: planted" in withheld_text(dropped)
