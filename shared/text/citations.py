"""Citation markers in answer text: `[n]` names the n-th source the model was given."""

from __future__ import annotations


def with_citation(text: str, source: int) -> str:
    """The sentence ending with its [n]: before the final full stop, as models write it."""
    text = text.rstrip()
    if text and text[-1] in ".!?":
        return f"{text[:-1]} [{source}]{text[-1]}"
    return f"{text} [{source}]"
