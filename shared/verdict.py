"""The guardrails' verdict: one vocabulary from a rail to the HTTP response.

The contract defines it once, as the proto enum `ragrail.v1.Verdict`
(shared/proto/ragrail/v1/guardrails.proto): ALLOW, BLOCK, MODIFY (allowed once changed).
`Verdict` is its one Python form, used by the rails and the guardrails service, the client and
the gateway's API alike. Its members are the proto's names; its values, the lower-case names
("allow", "block", "modify"), are what the rails' Colang flows compare (`$r.verdict ==
"block"`) and what the gateway's JSON says. A `StrEnum`, so a member equals its string.

`proto` and `of_proto` are the one mapping to and from the wire; the members are checked
against the proto enum when this module is imported.
"""

from __future__ import annotations

from enum import StrEnum, auto

from shared.proto.ragrail.v1 import guardrails_pb2

_PREFIX = "VERDICT_"


class Verdict(StrEnum):
    ALLOW = auto()
    BLOCK = auto()
    # Allowed once changed: the changed text comes with it.
    MODIFY = auto()

    @property
    def proto(self) -> guardrails_pb2.Verdict.ValueType:
        """The proto enum's value."""
        return guardrails_pb2.Verdict.Value(_PREFIX + self.name)

    @classmethod
    def of_proto(cls, value: int) -> Verdict:
        """The proto enum's value as a Verdict; an unknown or unspecified one is a block (it
        is not an allow)."""
        return _OF_PROTO.get(value, cls.BLOCK)


_UNSPECIFIED = _PREFIX + "UNSPECIFIED"
if {_PREFIX + v.name for v in Verdict} != set(guardrails_pb2.Verdict.keys()) - {_UNSPECIFIED}:
    raise ImportError(
        f"shared/verdict.py's Verdict {[v.name for v in Verdict]} differs from the proto enum "
        f"ragrail.v1.Verdict {guardrails_pb2.Verdict.keys()}: make them one again"
    )
_OF_PROTO = {v.proto: v for v in Verdict}
