"""Counts the links in a message: a question rarely needs many, link spam and some
injection payloads (exfiltration through image or link URLs) carry several."""

from __future__ import annotations

import re
from typing import Any

from services.guardrails.rails.base import LoadedRail, Outcome, Resources, guarded
from services.guardrails.rails.max_urls.settings import MaxUrlsSettings

# http(s) and www. links, up to the next space, quote or angle bracket.
URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"'()]+", re.IGNORECASE)


def check(text: str, max_urls: int) -> Outcome:
    found = URL.findall(text)
    if len(found) > max_urls:
        return Outcome(
            "block",
            f"{len(found)} links, more than the limit of {max_urls}",
            details={"urls": len(found)},
        )
    return Outcome(details={"urls": len(found)})


def load(settings: MaxUrlsSettings, resources: Resources) -> LoadedRail:
    async def ragrail_max_urls(text: str) -> dict[str, Any]:
        # Inline: a regular expression on a message the limits rail has capped.
        return await guarded(
            "max urls", settings.on_error, lambda: check(text, settings.max_urls), inline=True
        )

    return LoadedRail({"ragrail_max_urls": ragrail_max_urls})
