"""Stop strings cut from a text stream, whatever the engine and however tokens split them."""

from __future__ import annotations


class StopMatcher:
    """Feeds text deltas through; holds back a tail that could begin a stop string, so no part
    of a stop string is ever sent, and reports the first match."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self._held = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """(text safe to send now, whether a stop string matched: the answer ends there)."""
        if not self.stops:
            return text, False
        buffer = self._held + text
        found = [i for i in (buffer.find(s) for s in self.stops) if i >= 0]
        if found:
            self._held = ""
            return buffer[: min(found)], True
        keep = 0
        for stop in self.stops:
            for k in range(min(len(stop) - 1, len(buffer)), keep, -1):
                if buffer.endswith(stop[:k]):
                    keep = k
                    break
        self._held = buffer[len(buffer) - keep :]
        return buffer[: len(buffer) - keep], False

    def flush(self) -> str:
        """The held-back tail, once the answer ended without a match."""
        held, self._held = self._held, ""
        return held
