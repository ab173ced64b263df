"""Deny list: a user-editable list of regular expressions; a match blocks the message."""

from pathlib import Path

from services.guardrails.rails.base import input_rail
from services.guardrails.rails.deny_list.actions import load
from services.guardrails.rails.deny_list.settings import DenyListSettings

RAIL = input_rail("deny_list", DenyListSettings, load, Path(__file__).parent)
