"""Tables found in a document, kept as tables: each becomes Markdown table chunks of its own.

A table's text read as prose scatters its numbers away from their row and column labels; as
a Markdown table, with its caption and header, a chunk says what each number is. A table
larger than a chunk is split by rows, and every piece repeats the caption and header, so no
piece is a run of unlabelled numbers and no row is ever cut in two.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shared.chunking import TokenSpans

_SPACE = re.compile(r"\s+")
# A header row is looked for in the first rows; a table needs two rows and two columns.
MIN_ROWS = 2
MIN_COLS = 2
# A paragraph longer than this before a table is text about it, not its caption.
MAX_CAPTION_CHARS = 160


@dataclass
class Table:
    """A table as rows of cell texts, the first row its header."""

    rows: list[list[str]]
    caption: str = ""
    page: int | None = None  # 1-based, for paged documents

    def header_lines(self) -> list[str]:
        caption = self.caption
        if caption and not caption.lower().startswith("table"):
            caption = f"Table: {caption}"
        lines = [caption] if caption else []
        lines.append(_row(self.rows[0]))
        lines.append(_row(["---"] * len(self.rows[0])))
        return lines

    def body_lines(self) -> list[str]:
        return [_row(r) for r in self.rows[1:]]

    def markdown(self) -> str:
        return "\n".join(self.header_lines() + self.body_lines())


def _cell(text: object) -> str:
    # A pipe would end the cell early; a line break would end the row.
    return _SPACE.sub(" ", str(text or "")).strip().replace("|", "\\|")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def make_table(
    rows: Iterable[Sequence[object]], caption: str = "", page: int | None = None
) -> Table | None:
    """A Table from raw rows (cells may be None or hold line breaks): empty rows and columns
    dropped, short rows padded. None when what is left is not a table (under two rows or two
    columns)."""
    cleaned = [[_cell(c) for c in row] for row in rows]
    cleaned = [r for r in cleaned if any(r)]
    if not cleaned:
        return None
    width = max(len(r) for r in cleaned)
    cleaned = [r + [""] * (width - len(r)) for r in cleaned]
    keep = [j for j in range(width) if any(r[j] for r in cleaned)]
    cleaned = [[r[j] for j in keep] for r in cleaned]
    # A row that repeats the one before it (a merged cell seen twice) says nothing new.
    deduped = [r for i, r in enumerate(cleaned) if i == 0 or r != cleaned[i - 1]]
    if len(deduped) < MIN_ROWS or len(keep) < MIN_COLS:
        return None
    return Table(deduped, _SPACE.sub(" ", caption).strip(), page)


def split_table(table: Table, spans: TokenSpans, max_tokens: int) -> list[tuple[str, int]]:
    """The table's Markdown in pieces of at most `max_tokens` tokens, by whole rows, each
    piece starting with the caption and header. `spans` are the tokens of
    `table.markdown()`. Returns (text, tokens) pairs. A single row longer than the limit is a
    piece of its own (the embedder truncates it, as it would any text that long)."""
    head = table.header_lines()
    body = table.body_lines()
    counts = _tokens_per_line(head + body, spans)
    head_tokens = sum(counts[: len(head)])
    pieces: list[tuple[list[str], int]] = []
    current: list[str] = []
    used = head_tokens
    for line, n in zip(body, counts[len(head) :], strict=True):
        if current and used + n > max_tokens:
            pieces.append((current, used))
            current, used = [], head_tokens
        current.append(line)
        used += n
    if current:
        pieces.append((current, used))
    return [("\n".join(head + rows), n) for rows, n in pieces]


_MARKDOWN_PIPE = re.compile(r"\s*(?<!\\)\|\s*")
_DELIMITER_ROW = re.compile(r"^\|(?:\s*-+\s*\|)+$")


def embedding_text(piece: str) -> str:
    """A table piece as its vector reads it: the caption and the rows with their cells
    separated by spaces, without the Markdown around them. The chunk keeps its Markdown (for
    the reader and the model); to an embedding model the pipes and the delimiter row are a
    third of a table's tokens and say nothing (bench/documents.py: a 9-row table is 175
    tokens as Markdown, 113 without)."""
    lines = []
    for line in piece.split("\n"):
        if _DELIMITER_ROW.match(line):
            continue
        if line.startswith("|"):
            line = _MARKDOWN_PIPE.sub(" ", line).strip().replace("\\|", "|")
        lines.append(line)
    return "\n".join(lines)


def _tokens_per_line(lines: list[str], spans: TokenSpans) -> list[int]:
    """How many tokens start on each line of "\\n".join(lines)."""
    ends: list[int] = []
    offset = 0
    for line in lines:
        offset += len(line) + 1
        ends.append(offset)
    counts = [0] * len(lines)
    i = 0
    for start, end in zip(spans.starts, spans.ends, strict=True):
        if end <= start:
            continue  # special tokens have no width
        while i < len(ends) - 1 and start >= ends[i]:
            i += 1
        counts[i] += 1
    return counts
