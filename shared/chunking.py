"""Split text into overlapping windows of embedding-model tokens.

The chunker never tokenizes by itself: it takes the character offsets of each token
(``TokenSpans``), so the gateway can use the embedder service's Tokenize RPC and the chunks
match what the model will see. ``whitespace_spans`` is a stand-in tokenizer for tests and for
running without an embedder.

Rules, for ``Chunker(chunk_size=S, chunk_overlap=O)``:

* every chunk has at most S tokens, and every token is in at least one chunk;
* consecutive chunks share exactly O tokens (the next chunk starts O tokens before the end of
  the previous one);
* a chunk's text is ``text[start of its first token : end of its last token]``, so the
  original spacing and line breaks are kept;
* a window that would cut the text is ended early, at the best boundary in its last
  ``lookback`` share (20% by default): a paragraph break, else a sentence end, else a line
  break, else a comma or semicolon, else a word boundary (the last only matters for sub-word
  tokenizers). A paragraph break right after a heading (a Markdown heading, or a short line
  that does not end a sentence) is the worst boundary that still beats cutting a word, so
  headings stay with their section. Among boundaries of the best kind, one that lets the next
  window start at a word (not inside one) wins, then the latest;
* a text of at most S tokens is one chunk; a text without tokens gives no chunks;
* the result depends only on the input (deterministic).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from shared.errors import InvalidArgument, RagrailError

__all__ = [
    "MIN_CHUNK_SIZE",
    "Chunker",
    "TextChunk",
    "TokenSpans",
    "Tokenize",
    "whitespace_spans",
]

MIN_CHUNK_SIZE = 16


@dataclass
class TokenSpans:
    """Character offsets ``[start, end)`` of each token of a text, in order, special tokens
    excluded. Zero-width spans (padding, special tokens) are ignored by the chunker."""

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)

    @classmethod
    def from_offsets(cls, offsets: Iterable[tuple[int, int]]) -> TokenSpans:
        """From ``(start, end)`` pairs, e.g. ``tokenizers.Encoding.offsets``."""
        spans = cls()
        for start, end in offsets:
            spans.starts.append(int(start))
            spans.ends.append(int(end))
        return spans

    def __len__(self) -> int:
        return len(self.starts)


@dataclass
class TextChunk:
    """One window of a text: ``text == source[start_char:end_char]``."""

    index: int
    text: str
    start_char: int
    end_char: int
    num_tokens: int


Tokenize = Callable[[str], TokenSpans]
"""A tokenizer as the chunker needs it: text -> token character offsets."""

_WORD = re.compile(r"\S+")


def whitespace_spans(text: str) -> TokenSpans:
    """Whitespace-separated words as tokens: a fallback tokenizer (no model needed)."""
    spans = TokenSpans()
    for match in _WORD.finditer(text):
        spans.starts.append(match.start())
        spans.ends.append(match.end())
    return spans


# Boundary strengths, best last. Right after a heading is the worst place that is still
# better than cutting inside a word.
_NONE, _AFTER_HEADING, _WORD_BREAK, _CLAUSE, _LINE_BREAK, _SENTENCE, _PARAGRAPH = range(7)

_PARAGRAPH_GAP = re.compile(r"\n[^\S\n]*\n")
_MD_HEADING = re.compile(r" {0,3}#{1,6}[ \t]")
_MAX_HEADING_CHARS = 80
_MAX_HEADING_LINE = 300  # longest line examined for a Markdown heading
# "2." or "b)" opening a line is a list item's number, not the end of a sentence.
_LIST_MARKER = re.compile(r"[^\S\n]*(?:\d{1,3}|[A-Za-z]|[ivxIVX]{1,4})[.)]")
# A sentence ends with . ! ? or an ellipsis, maybe followed by closing quotes or brackets.
_SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u2019\u201d\u00bb)\]]*\Z")
_CLAUSE_END = re.compile(r"[,;\uff0c\uff1b][\"'\u2019\u201d\u00bb)\]]*\Z")
# CJK full stops end a sentence even without a following space.
_CJK_SENTENCE_END = re.compile(r"[\u3002\uff01\uff1f\uff0e][\u300d\u300f\uff09\u201d]*\Z")


class Chunker:
    """Token-window chunker; see the module docstring for the rules."""

    def __init__(
        self, chunk_size: int = 256, chunk_overlap: int = 32, *, lookback: float = 0.2
    ) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
            raise InvalidArgument(f"chunk_size must be an integer, got {chunk_size!r}.")
        if isinstance(chunk_overlap, bool) or not isinstance(chunk_overlap, int):
            raise InvalidArgument(f"chunk_overlap must be an integer, got {chunk_overlap!r}.")
        if chunk_size < MIN_CHUNK_SIZE:
            raise InvalidArgument(
                f"chunk_size must be at least {MIN_CHUNK_SIZE} tokens, got {chunk_size}."
            )
        if not 0 <= chunk_overlap < chunk_size:
            raise InvalidArgument(
                f"chunk_overlap must be between 0 and chunk_size - 1 ({chunk_size - 1}), "
                f"got {chunk_overlap}."
            )
        if not 0.0 <= lookback < 1.0:
            raise InvalidArgument(f"lookback must be in [0, 1), got {lookback}.")
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.lookback = lookback
        # A window ends no earlier than this many tokens after its start.
        self._min_window = max(chunk_size - math.floor(chunk_size * lookback), 1)

    def __repr__(self) -> str:
        return (
            f"Chunker(chunk_size={self.chunk_size}, chunk_overlap={self.chunk_overlap}, "
            f"lookback={self.lookback})"
        )

    def chunk(self, text: str, tokenize: Tokenize = whitespace_spans) -> list[TextChunk]:
        """Tokenize ``text`` with ``tokenize`` and split it."""
        return self.split(text, tokenize(text))

    def split(self, text: str, spans: TokenSpans) -> list[TextChunk]:
        """Split ``text`` into chunks along the token offsets in ``spans``."""
        starts, ends = _checked_spans(text, spans)
        n = len(starts)
        if n == 0:
            return []
        chunks: list[TextChunk] = []
        first = 0
        while True:
            hard_end = first + self.chunk_size
            end = n if hard_end >= n else self._window_end(text, starts, ends, first, hard_end)
            chunks.append(
                TextChunk(
                    index=len(chunks),
                    text=text[starts[first] : ends[end - 1]],
                    start_char=starts[first],
                    end_char=ends[end - 1],
                    num_tokens=end - first,
                )
            )
            if end >= n:
                return chunks
            first = end - self.chunk_overlap

    def _window_end(
        self, text: str, starts: list[int], ends: list[int], first: int, hard_end: int
    ) -> int:
        """Exclusive token index where the window starting at ``first`` ends (< len)."""
        # Ending at e means the next window starts at e - overlap, which must be past `first`.
        lowest = max(first + self._min_window, first + self.chunk_overlap + 1)
        overlap = self.chunk_overlap
        best_end, best_score = hard_end, (-1, False)
        for e in range(hard_end, lowest - 1, -1):  # latest first: ties go to the latest
            # Tie-break: the next window should not start inside a word, where its text would
            # begin with a word fragment (which also tokenizes differently on its own).
            nxt = e - overlap
            score = (
                _boundary_strength(text, ends[e - 1], starts[e]),
                _starts_word(text, ends[nxt - 1], starts[nxt]),
            )
            if score > best_score:
                best_end, best_score = e, score
        return best_end


def _starts_word(text: str, prev_end: int, next_start: int) -> bool:
    """Whether a token starting at ``next_start`` begins a word (or is punctuation), given
    that the previous token ends at ``prev_end``."""
    if any(ch.isspace() for ch in text[prev_end:next_start]):
        return True
    return not (
        text[prev_end - 1 : prev_end].isalnum() and text[next_start : next_start + 1].isalnum()
    )


def _line_before(text: str, pos: int, max_chars: int) -> str | None:
    """The text from the start of the line holding ``pos`` up to ``pos``, or None when that
    is longer than ``max_chars`` (bounded, so long lines cost no more than short ones)."""
    low = max(0, pos - max_chars - 1)
    newline = text.rfind("\n", low, pos)
    if newline < 0 and low > 0:
        return None
    return text[newline + 1 : pos]


def _looks_like_heading(line: str) -> bool:
    """A Markdown heading, or a short line that does not end a sentence (a heading in text
    from HTML, DOCX or PDF, or a line introducing a list with a colon)."""
    if _MD_HEADING.match(line):
        return True
    stripped = line.strip()
    return len(stripped) <= _MAX_HEADING_CHARS and not _SENTENCE_END.search(stripped)


def _boundary_strength(text: str, prev_end: int, next_start: int) -> int:
    """How good a place to cut the gap between a token ending at ``prev_end`` and the next
    one starting at ``next_start`` is."""
    gap = text[prev_end:next_start]  # empty when tokens touch (or overlap)
    if _PARAGRAPH_GAP.search(gap):
        # Ending right after a heading would separate it from its section.
        line = _line_before(text, prev_end, _MAX_HEADING_LINE)
        return _AFTER_HEADING if line is not None and _looks_like_heading(line) else _PARAGRAPH
    before = text[max(0, prev_end - 8) : prev_end]
    if _CJK_SENTENCE_END.search(before):
        return _SENTENCE
    if not any(ch.isspace() for ch in gap):
        return _NONE  # inside a word, or punctuation glued to a word
    if (
        _SENTENCE_END.search(before)
        and not text[next_start : next_start + 1].islower()  # "e.g. the", "approx. five"
        and not _LIST_MARKER.fullmatch(_line_before(text, prev_end, 12) or "")
    ):
        return _SENTENCE
    if "\n" in gap:
        return _LINE_BREAK
    if _CLAUSE_END.search(before):
        return _CLAUSE
    return _WORD_BREAK


def _checked_spans(text: str, spans: TokenSpans) -> tuple[list[int], list[int]]:
    """Offsets without zero-width tokens; raises when the spans cannot belong to ``text``."""
    if len(spans.starts) != len(spans.ends):
        raise RagrailError(
            f"Token spans are inconsistent: {len(spans.starts)} starts but {len(spans.ends)} ends."
        )
    starts: list[int] = []
    ends: list[int] = []
    length = len(text)
    for start, end in zip(spans.starts, spans.ends, strict=True):
        if end <= start:
            continue  # padding or special token
        if start < 0 or end > length:
            raise RagrailError(
                f"Token span [{start}, {end}) lies outside the text ({length} characters); "
                "the spans belong to a different text."
            )
        if starts and start < starts[-1]:
            raise RagrailError("Token spans are not in text order.")
        starts.append(start)
        ends.append(end)
    covered = max(ends, default=0)
    if any(ch.isalnum() for ch in text[covered:]):
        raise RagrailError(
            f"The tokenizer covered only the first {covered} of {length} characters; it is "
            "probably truncating its input. Disable truncation (and padding) for tokenization."
        )
    return starts, ends
