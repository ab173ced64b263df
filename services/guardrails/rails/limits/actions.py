"""Length and character-set limits: too long, too many lines, or characters people cannot see
(control, format and private-use code points: zero-width joiners, bidi overrides, tag
characters) that smuggle instructions past a reader.

The check runs in the event loop (inline): it takes microseconds, less than a thread hand-off."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

from services.guardrails.rails.base import LoadedRail, Outcome, Resources, guarded
from services.guardrails.rails.limits.settings import LimitsSettings

# Unicode general categories never needed in a question or an answer; tab, newline and
# carriage return are allowed separately.
HIDDEN_CATEGORIES = {"Cc": "control", "Cf": "format (invisible)", "Co": "private use"}
ALLOWED_CONTROLS = {"\t", "\n", "\r"}


@dataclass
class LimitsRail:
    max_chars: int = 8000
    max_lines: int = 400
    # "block" refuses text with hidden characters; "strip" removes them and lets it through.
    hidden_chars: str = "block"

    def check(self, text: str) -> Outcome:
        if len(text) > self.max_chars:
            return Outcome("block", f"{len(text)} characters, over the limit of {self.max_chars}")
        lines = text.count("\n") + 1
        if lines > self.max_lines:
            return Outcome("block", f"{lines} lines, more than the limit of {self.max_lines}")
        hidden = [
            (i, ch)
            for i, ch in enumerate(text)
            if ch not in ALLOWED_CONTROLS and unicodedata.category(ch) in HIDDEN_CATEGORIES
        ]
        if not hidden:
            return Outcome()
        first, ch = hidden[0]
        kind = HIDDEN_CATEGORIES[unicodedata.category(ch)]
        what = f"{len(hidden)} hidden character(s), first U+{ord(ch):04X} ({kind}) at {first}"
        if self.hidden_chars == "strip":
            positions = {i for i, _ in hidden}
            kept = "".join(c for i, c in enumerate(text) if i not in positions)
            return Outcome("modify", f"removed {what}", kept)
        return Outcome("block", what)


def load(settings: LimitsSettings, resources: Resources) -> LoadedRail:
    rail = LimitsRail(settings.max_chars, settings.max_lines, settings.hidden_chars)

    async def ragrail_limits(text: str) -> dict[str, Any]:
        return await guarded("limits", settings.on_error, lambda: rail.check(text), inline=True)

    return LoadedRail({"ragrail_limits": ragrail_limits})
