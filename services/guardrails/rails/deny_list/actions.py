"""A user-editable list of regular expressions; a match blocks the text. Inline (in the event
loop): the limits rail runs first and caps the text's length."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from services.guardrails.rails.base import LoadedRail, Outcome, Resources, guarded
from services.guardrails.rails.deny_list.settings import DenyListSettings
from shared.errors import FailedPrecondition


@dataclass
class DenyPattern:
    name: str
    regex: re.Pattern[str]


class DenyListRail:
    def __init__(self, patterns: list[dict[str, str]], where: str) -> None:
        self.patterns: list[DenyPattern] = []
        for i, entry in enumerate(patterns):
            pattern = str(entry.get("pattern", ""))
            name = str(entry.get("name") or pattern)
            try:
                # Case-insensitive: people type "IGNORE ALL" as often as "ignore all".
                regex = re.compile(pattern, re.IGNORECASE)
            except re.error as exc:
                raise FailedPrecondition(
                    f"{where}: deny_list pattern {i} ({pattern!r}) is no valid regular "
                    f"expression: {exc}"
                ) from exc
            if not pattern:
                raise FailedPrecondition(f"{where}: deny_list pattern {i} is empty")
            self.patterns.append(DenyPattern(name, regex))

    def check(self, text: str) -> Outcome:
        for entry in self.patterns:
            match = entry.regex.search(text)
            if match:
                return Outcome(
                    "block",
                    f"matches deny-list pattern '{entry.name}' at {match.start()}",
                    details={"pattern": entry.name},
                )
        return Outcome()


def load(settings: DenyListSettings, resources: Resources) -> LoadedRail:
    rail = DenyListRail(
        [p.model_dump() for p in settings.patterns], f"{resources.config_file} deny_list"
    )

    async def ragrail_deny_list(text: str) -> dict[str, Any]:
        return await guarded("deny list", settings.on_error, lambda: rail.check(text), inline=True)

    return LoadedRail({"ragrail_deny_list": ragrail_deny_list})
