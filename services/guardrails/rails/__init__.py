"""The rails the guardrails service knows: one folder each (its settings, actions and Colang
flows, see base.py), registered here, once. Both engines read RAILS; config.yml's `rails:`
section says which of their flows run, in which order.

To add a rail: write its folder (docs/adding-a-rail.md) and add one line below.
"""

from services.guardrails.rails import (
    content_safety,
    deny_list,
    document_injection,
    grounding,
    injection,
    limits,
    max_urls,
    nemo_library,
    pii,
    remote_safety,
    topics,
)
from services.guardrails.rails.base import Flow, Outcome, Rail

RAILS: list[Rail] = [
    limits.RAIL,
    deny_list.RAIL,
    injection.RAIL,
    content_safety.RAIL,
    remote_safety.RAIL,
    topics.RAIL,
    pii.RAIL,
    document_injection.RAIL,
    grounding.RAIL,
    max_urls.RAIL,
    # NeMo Guardrails' own library flows the direct engine can also run.
    nemo_library.INJECTION_DETECTION,
]

__all__ = ["RAILS", "Flow", "Outcome", "Rail", "flows_by_name"]


def flows_by_name() -> dict[str, tuple[Rail, Flow]]:
    """Every flow of every registered rail, with its rail."""
    return {flow.name: (rail, flow) for rail in RAILS for flow in rail.flows}
