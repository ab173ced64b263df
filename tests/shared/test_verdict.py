"""The verdict is one vocabulary: the proto enum and its one Python form, shared/verdict.py."""

from __future__ import annotations

import json

from shared.proto.ragrail.v1 import guardrails_pb2
from shared.verdict import Verdict


def test_each_verdict_maps_to_its_proto_value_and_back() -> None:
    for verdict in Verdict:
        assert guardrails_pb2.Verdict.Name(verdict.proto) == f"VERDICT_{verdict.name}"
        assert Verdict.of_proto(verdict.proto) is verdict
    assert [v.value for v in Verdict] == ["allow", "block", "modify"]


def test_an_unknown_or_unspecified_verdict_is_a_block() -> None:
    assert Verdict.of_proto(guardrails_pb2.VERDICT_UNSPECIFIED) is Verdict.BLOCK
    assert Verdict.of_proto(99) is Verdict.BLOCK


def test_a_verdict_is_its_string_wherever_it_goes() -> None:
    assert Verdict.BLOCK == "block" and {Verdict.MODIFY} == {"modify"}
    assert json.dumps({"verdict": Verdict.ALLOW}) == '{"verdict": "allow"}'
    assert f"{Verdict.MODIFY}" == "modify"
