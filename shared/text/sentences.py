"""Sentences of a text, as character offsets.

`sentence_spans` is the sentence splitter: the gateway's evidence selection and grounding,
the reader, the reader's and generator's trainers and the benchmarks share it, so that "a
sentence" means the same thing everywhere. It knows abbreviations, initials and line
structure.

Two plainer punctuation rules remain beside it, each for callers whose models or published
figures were measured with it (moving them onto `sentence_spans` changes what those models
were trained and calibrated on, so it waits for a retrain and a bench run):
- `stop_pieces` / `STOP_BREAK`: a break after . ! or ? and whitespace, and at line breaks.
  The guard model's and the injection classifier's windows (`windows`), the planting of
  attacks in the guard's training data, the generator's grounding set and the output
  requests of bench/guardrails.py (`STOP_ONLY`, `lines=False`: line breaks do not separate
  there) cut text with it.
- `claim_spans`: the same breaks, but a line that opens with . ! or ? keeps it in its first
  sentence. The guardrails' grounding rail cuts answers into claims and context into
  sentences with it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# -- the sentence splitter --------------------------------------------------------------------

# Words that end with a full stop without ending a sentence (scientific and general text).
_ABBREVIATIONS = frozenset(
    re.findall(
        r"\S+",
        "al e.g i.e etc fig figs eq eqs ref refs vs approx ca cf no nos vol pp dr mr mrs ms prof "
        "st jan feb mar apr jun jul aug sep sept oct nov dec inc ltd co corp dept univ est min "
        "max resp sp spp var mol wt",
    )
)
_OPENERS = "\"'([\u201c\u2018"  # quotes and brackets that may open a sentence
# A candidate boundary: sentence-final punctuation, optional closing quote or bracket, space.
_BOUNDARY = re.compile(r"""[.!?]["')\]]*\s+""")
# The word before sentence-final punctuation, at the end of the text searched.
_LAST_WORD = re.compile(r"(\S+)[.!?][\"')\]]*\s*$")
_LAST_WORD_CHARS = 80
# Line structure (headings, list items, table rows) also ends a sentence.
_LINES = re.compile(r"\n\s*\n|\n(?=\s*(?:[#>*\-+|]|\d+[.)]\s))")


@dataclass(frozen=True)
class Span:
    start: int
    end: int


def _ends_sentence(text: str, stop: int, nxt: int) -> bool:
    """Whether the punctuation before `stop` ends a sentence, given the next text at `nxt`."""
    if nxt >= len(text):
        return True
    following = text[nxt]
    if not (following.isupper() or following.isdigit() or following in _OPENERS):
        return False
    # Only the text just before the stop: a search over all of text[:stop] made splitting a
    # long article quadratic (minutes for a 100k-character paper). A word longer than the
    # window is no abbreviation or initial either way.
    word = _LAST_WORD.search(text, max(0, stop - _LAST_WORD_CHARS), stop)
    if word is None:
        return True
    token = word.group(1).lower().strip("(\"'[")
    if token in _ABBREVIATIONS:
        return False
    # Initials ("J. Smith") and single letters end no sentence.
    return not (len(token) == 1 and token.isalpha())


def sentence_spans(text: str, max_chars: int = 600) -> list[Span]:
    """Sentences of `text` as (start, end) offsets, stripped of surrounding whitespace.

    Rule-based, for speed and no model: sentence-final punctuation followed by a capital,
    digit or opening quote, unless the word before is a known abbreviation or an initial;
    blank lines and list or heading lines also separate. A "sentence" longer than
    `max_chars` (a table, a run-on list) is cut at the last space before the limit so that a
    piece of evidence stays short.
    """
    pieces: list[tuple[int, int]] = []
    start = 0
    for block in _LINES.finditer(text):
        pieces.append((start, block.start()))
        start = block.end()
    pieces.append((start, len(text)))

    spans: list[Span] = []
    for lo, hi in pieces:
        begin = lo
        for m in _BOUNDARY.finditer(text, lo, hi):
            if _ends_sentence(text, m.end(), m.end()):
                spans.extend(_trimmed(text, begin, m.end(), max_chars))
                begin = m.end()
        spans.extend(_trimmed(text, begin, hi, max_chars))
    return spans


def _trimmed(text: str, lo: int, hi: int, max_chars: int) -> list[Span]:
    while lo < hi and text[lo].isspace():
        lo += 1
    while hi > lo and text[hi - 1].isspace():
        hi -= 1
    out: list[Span] = []
    while hi - lo > max_chars:
        cut = text.rfind(" ", lo + max_chars // 2, lo + max_chars)
        cut = cut if cut > lo else lo + max_chars
        out.append(Span(lo, cut))
        lo = cut
        while lo < hi and text[lo].isspace():
            lo += 1
    if hi > lo:
        out.append(Span(lo, hi))
    return out


def sentence_around(text: str, start: int, end: int) -> tuple[int, int]:
    """The offsets of the sentence(s) of `text` that hold [start, end)."""
    return span_around(sentence_spans(text), start, end)


def span_around(spans: Sequence[Any], start: int, end: int) -> tuple[int, int]:
    """The offsets of the spans (anything with .start and .end, in order) that hold
    [start, end), widened to [start, end) itself where no span covers it."""
    lo = next((s.start for s in spans if s.end > start), start)
    hi = next((s.end for s in reversed(spans) if s.start < end), end)
    return min(lo, start), max(hi, end)


# -- the punctuation rules --------------------------------------------------------------------

# A break: whitespace after . ! or ? (so "example.com" or "3.5" make none), or line breaks.
STOP_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
# The same without line breaks: whitespace after . ! or ? only.
STOP_ONLY = re.compile(r"(?<=[.!?])\s+")


def stop_pieces(text: str, *, lines: bool = True) -> list[str]:
    """The non-empty pieces of `text` between `STOP_BREAK`s, stripped; with lines=False a
    line break separates only after . ! or ?."""
    rule = STOP_BREAK if lines else STOP_ONLY
    return [piece for piece in (s.strip() for s in rule.split(text)) if piece]


def windows(text: str, max_chars: int) -> list[str]:
    """Consecutive sentences (`stop_pieces`) packed into pieces of at most about max_chars
    characters (a sentence longer than that is its own piece; the encoder truncates it): how
    a classifier scores a long text, since an instruction hidden in the middle of a long
    passage would fall outside the encoder's token window."""
    pieces: list[str] = []
    current = ""
    for sentence in stop_pieces(text):
        if current and len(current) + 1 + len(sentence) > max_chars:
            pieces.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}".strip()
    if current:
        pieces.append(current)
    return pieces or [text]


# A claim ends at . ! or ? followed by whitespace, at a line break, or at the end; its first
# character is never a break, so a line opening with "..." keeps it.
_CLAIM = re.compile(r"[^\n]+?(?:[.!?]+(?=\s|$)|(?=\n)|$)")


def claim_spans(text: str, min_chars: int = 1) -> list[Span]:
    """Offsets of the sentences of `text` (the grounding rail's rule, above), stripped, that
    are at least `min_chars` long."""
    spans = []
    for match in _CLAIM.finditer(text):
        piece = match.group(0)
        stripped = piece.strip()
        if stripped and len(stripped) >= min_chars:
            start = match.start() + piece.index(stripped[0])
            spans.append(Span(start, start + len(stripped)))
    return spans
