"""Text uploads: plain text (and reStructuredText, CSV, JSON, kept as text) and Markdown,
decoded (BOM, UTF-8, or UTF-8 with the odd invalid byte replaced) and normalised; a
Markdown file's title from its front matter or first heading."""

from __future__ import annotations

import codecs
import re
from typing import TYPE_CHECKING, Any

from services.gateway.documents.ingest.filenames import supported_list
from services.gateway.documents.ingest.normalize import clean_chars, normalize_whitespace
from shared.errors import InvalidArgument

if TYPE_CHECKING:
    from services.gateway.documents.ingest.context import ParseContext

# Reject text that decodes with more than this share of U+FFFD / control characters.
_MAX_JUNK_RATIO = 0.3
_JUNK_CONTROL = re.compile(r"[\x01-\x08\x0b\x0e-\x1f\x7f]")

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_text(data: bytes, name: str) -> tuple[str, str]:
    """Decode an upload's bytes; returns (text, encoding used)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding), encoding
            except UnicodeDecodeError:
                break  # a BOM followed by garbage: judge it like any other bytes below
    if b"\x00" in data:
        raise InvalidArgument(
            f"'{name}' looks like a binary file, not text (it contains NUL bytes). Upload a "
            f"text file saved as UTF-8, or one of: {supported_list()}."
        )
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
    junk = text.count("\ufffd") + len(_JUNK_CONTROL.findall(text))
    if junk > _MAX_JUNK_RATIO * max(len(text), 1):
        raise InvalidArgument(
            f"'{name}' could not be read as text: most of it is not valid UTF-8. Save it as "
            "UTF-8 text (or check that it really is a text file) and upload it again."
        )
    return text, "utf-8 (invalid bytes replaced)"


def parse_plain(
    data: bytes, name: str, ctx: ParseContext
) -> tuple[str, str | None, dict[str, Any]]:
    text, encoding = decode_text(data, name)
    return normalize_whitespace(text), None, {"encoding": encoding}


_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_FRONT_MATTER_LINE = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:[ \t]*(.*?)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def _markdown_title(text: str) -> str | None:
    """The first ATX (``# Title``) or setext (``Title\\n=====``) heading outside code fences."""
    lines = text.split("\n")
    in_fence = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        atx = _ATX_HEADING.match(line)
        if atx:
            return atx.group(1).strip()
        if (
            line.strip()
            and i + 1 < len(lines)
            and _SETEXT_UNDERLINE.match(lines[i + 1])
            and not line.lstrip().startswith(("-", "*", "+", ">", "|"))
        ):
            return line.strip()
    return None


def parse_markdown(
    data: bytes, name: str, ctx: ParseContext
) -> tuple[str, str | None, dict[str, Any]]:
    text, encoding = decode_text(data, name)
    text = clean_chars(text).lstrip("\n")
    metadata: dict[str, Any] = {"encoding": encoding}
    title: str | None = None
    front = _FRONT_MATTER.match(text)
    if front:
        fields: dict[str, str] = {}
        for line in front.group(1).split("\n"):
            kv = _FRONT_MATTER_LINE.match(line)
            if kv and kv.group(2):
                fields[kv.group(1).lower()] = kv.group(2).strip("'\"")
        if fields:  # only drop it when it really is key: value front matter
            metadata["front_matter"] = fields
            title = fields.get("title") or None
            text = text[front.end() :]
    text = normalize_whitespace(text, keep_indent=True)
    return text, title or _markdown_title(text), metadata
