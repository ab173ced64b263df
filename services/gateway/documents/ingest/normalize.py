"""Text as the chunker wants it: NFC, one kind of line break, no invisible or control
characters, runs of spaces collapsed and paragraph breaks kept; and pages joined into one
text with where each starts."""

from __future__ import annotations

import re
import unicodedata

# Characters removed outright: zero-width spaces/joiners, soft hyphen, BOM, word joiner.
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))
_HSPACE = re.compile(r"[^\S\n]+")  # any whitespace except newline
_LEADING_SPACE = re.compile(r"[^\S\n]*")
# C0/C1 control characters except tab and newline, and lone surrogates.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_BLANK_LINES = re.compile(r"\n{3,}")


def clean_chars(text: str) -> str:
    """NFC-normalise, unify line endings, drop invisible and control characters."""
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\u2028", "\n").replace("\u2029", "\n\n").replace("\f", "\n\n")
    return _CONTROL.sub("", text.translate(_INVISIBLE))


def normalize_whitespace(text: str, *, keep_indent: bool = False) -> str:
    """Collapse runs of spaces/tabs to one space, strip line ends, keep paragraph breaks.

    Single newlines stay (line structure matters for lists, headings and tables); runs of
    blank lines become one blank line. With ``keep_indent`` the leading indentation of each
    line is kept (tabs as four spaces) so Markdown code blocks and nested lists survive.
    """
    lines: list[str] = []
    for raw in clean_chars(text).split("\n"):
        if keep_indent:
            indent = _LEADING_SPACE.match(raw)
            end = indent.end() if indent else 0
            body = _HSPACE.sub(" ", raw[end:]).rstrip()
            lines.append(raw[:end].replace("\t", "    ") + body if body else "")
        else:
            lines.append(_HSPACE.sub(" ", raw).strip())
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n")


def join_pages(page_texts: list[str]) -> tuple[str, list[int]]:
    """Pages' texts joined by blank lines, and where each page starts in the result (an
    empty page starts where the next text does)."""
    page_starts: list[int] = []
    parts: list[str] = []
    offset = 0
    for text in page_texts:
        if text and parts:
            offset += 2  # the "\n\n" joining it to the previous page
        page_starts.append(offset)
        if text:
            parts.append(text)
            offset += len(text)
    return "\n\n".join(parts), page_starts
