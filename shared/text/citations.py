"""Citation markers in answer text: `[n]` names the n-th source the model was given."""

from __future__ import annotations

import re

# [1], [1, 2], and the reference marks of papers: [6, 18, 23], [4-7] (hyphen or en dash).
CITATION = re.compile(r"\s*\[(\d+)(?:\s*[,\-\u2013]\s*\d+)*\]")
# The sources a marker names: [1] and [1, 2]; a range of a paper's is not ours.
_CITED = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
# "... the sun. [1] The length": markers after a full stop.
_AFTER_STOP = re.compile(r"([.!?])[ \t]*((?:\[\d+(?:\s*,\s*\d+)*\][ \t]*)+)")


def with_citation(text: str, source: int) -> str:
    """The sentence ending with its [n]: before the final full stop, as models write it."""
    text = text.rstrip()
    if text and text[-1] in ".!?":
        return f"{text[:-1]} [{source}]{text[-1]}"
    return f"{text} [{source}]"


def without_citations(text: str) -> str:
    """The text without its markers (they are not words of the answer)."""
    return CITATION.sub("", text)


def cited(text: str) -> tuple[int, ...]:
    """The source numbers `text`'s markers name, in order."""
    return tuple(int(n) for group in _CITED.findall(text) for n in re.split(r"\s*,\s*", group))


def citations_inside(text: str) -> str:
    """Markers written after a full stop moved before it: "... the sun. [1] The length" ->
    "... the sun [1]. The length", as a citation after the stop belongs to the sentence
    before it."""
    return _AFTER_STOP.sub(lambda m: f" {m.group(2).strip()}{m.group(1)} ", text)
