"""A model's results for recent texts, so that rails reading the same message in one check
(and the next check on the same conversation) run the model on it once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

Result = TypeVar("Result")


class TextResultCache(Generic[Result]):
    """One result per text for the `size` texts used last; safe across worker threads. The
    model runs outside the lock, so two threads may compute the same new text at once (the
    same result; the later one is kept)."""

    def __init__(self, size: int = 256) -> None:
        self._items: OrderedDict[str, Result] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def results(
        self, texts: list[str], compute: Callable[[list[str]], Iterable[Result]]
    ) -> list[Result]:
        """The result of each text, in order; `compute` gets the texts not cached, once each,
        and returns their results in that order."""
        with self._lock:
            found = {t: self._items[t] for t in texts if t in self._items}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            found.update(zip(missing, compute(missing), strict=True))
        with self._lock:
            for t in dict.fromkeys(texts):
                self._items[t] = found[t]
                self._items.move_to_end(t)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return [found[t] for t in texts]

    def get(self, text: str) -> Result | None:
        with self._lock:
            return self._items.get(text)
