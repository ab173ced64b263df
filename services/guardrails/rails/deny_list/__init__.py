"""Deny list: a user-editable list of regular expressions; a match blocks the message."""

from pathlib import Path

from services.guardrails.rails.base import Flow, Rail
from services.guardrails.rails.deny_list.actions import load
from services.guardrails.rails.deny_list.settings import DenyListSettings

RAIL = Rail(
    name="deny_list",
    settings=DenyListSettings,
    flows=(Flow("ragrail deny list", "input", "ragrail_deny_list"),),
    load=load,
    folder=Path(__file__).parent,
)
