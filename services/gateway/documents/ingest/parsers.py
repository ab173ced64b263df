"""Turn uploaded files into plain text.

``parse_document`` accepts the raw bytes of an upload plus its file name (and, optionally, the
MIME type the client declared) and returns a ``ParsedDocument`` whose ``text`` is ready to be
chunked: whitespace is normalised (runs of spaces collapsed, paragraph breaks kept as one blank
line), control characters are removed and the text is NFC-normalised.

Failures a client can fix are raised as domain errors: ``UnsupportedMediaType`` (HTTP 415) for
a file type we cannot read, ``InvalidArgument`` for an empty, binary, corrupt, encrypted or
text-less file. Every message names the file and says what to do.

This module picks the parser; each format family has its own module: textfiles (plain text,
Markdown), webpages (HTML), wordfiles (DOCX), pdf (with pdf_tables and ocr), images.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from services.gateway.documents.ingest.context import PageCounter, ParseContext
from services.gateway.documents.ingest.filenames import basename, extension, stem, supported_list
from services.gateway.documents.ingest.images import parse_image
from services.gateway.documents.ingest.normalize import join_pages, normalize_whitespace
from services.gateway.documents.ingest.pdf import parse_pdf
from services.gateway.documents.ingest.tables import Table
from services.gateway.documents.ingest.textfiles import parse_markdown, parse_plain
from services.gateway.documents.ingest.webpages import parse_html
from services.gateway.documents.ingest.wordfiles import parse_docx
from shared.errors import InvalidArgument, RagrailError
from shared.formats import (
    APPLICATION_DOCX,
    APPLICATION_JSON,
    APPLICATION_PDF,
    IMAGES,
    SUPPORTED,
    TEXT_CSV,
    TEXT_HTML,
    TEXT_MARKDOWN,
    TEXT_PLAIN,
    TEXT_RST,
)

__all__ = [
    "SUPPORTED",
    "PageCounter",
    "ParseContext",
    "ParsedDocument",
    "UnsupportedMediaType",
    "detect_content_type",
    "join_pages",
    "normalize_whitespace",
    "parse_document",
]

# Declared MIME types we accept besides the canonical ones above, mapped to the canonical type.
_MIME_ALIASES: dict[str, str] = {
    "text/x-markdown": TEXT_MARKDOWN,
    "text/md": TEXT_MARKDOWN,
    "application/xhtml+xml": TEXT_HTML,
    "application/x-pdf": APPLICATION_PDF,
    "text/rst": TEXT_RST,
    "text/json": APPLICATION_JSON,
}

# Content types whose bytes are decoded and kept as (normalised) text.
_PLAIN_TYPES = frozenset({TEXT_PLAIN, TEXT_RST, TEXT_CSV, APPLICATION_JSON})


class UnsupportedMediaType(RagrailError):
    """The upload is of a file type the ingest pipeline cannot read."""

    grpc_code = grpc.StatusCode.INVALID_ARGUMENT
    http_status = 415


@dataclass
class ParsedDocument:
    """The text of one uploaded file and what we learnt about it.

    ``title`` comes from the document itself where it has one (HTML ``<title>`` or first
    ``<h1>``, first Markdown heading or front-matter ``title``, DOCX core properties or first
    Title/Heading paragraph, PDF info dictionary), otherwise from the file name.
    ``metadata`` always has ``filename``; other keys depend on the format (``pages`` and
    ``page_starts`` for PDF and images, ``ocr_pages`` where OCR read some, ``encoding`` for
    text, ``author`` where known, ...). ``tables`` are the tables taken out of ``text`` to be
    stored as table chunks; ``warnings`` name what was skipped (a page that could not be read).
    """

    text: str
    title: str
    content_type: str
    metadata: dict[str, Any] = field(default_factory=dict)
    tables: list[Table] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _media_type(declared: str | None) -> str:
    """``'Text/HTML; charset=utf-8'`` -> ``'text/html'``."""
    if not declared:
        return ""
    return declared.split(";", 1)[0].strip().lower()


def detect_content_type(filename: str, declared: str | None) -> str:
    """The canonical content type of an upload: by file extension first, then by the MIME
    type the client declared. Raises ``UnsupportedMediaType`` when neither is supported."""
    by_extension = SUPPORTED.get(extension(filename))
    if by_extension:
        return by_extension
    media_type = _media_type(declared)
    if media_type in SUPPORTED.values():
        return media_type
    if media_type in _MIME_ALIASES:
        return _MIME_ALIASES[media_type]
    what = f"'{basename(filename)}'" if filename.strip() else "the upload"
    declared_note = f" (declared type {media_type!r})" if media_type else ""
    raise UnsupportedMediaType(
        f"Cannot ingest {what}{declared_note}: unsupported file type. Supported extensions: "
        f"{supported_list()}. Convert the file to one of these formats and upload it again."
    )


# --------------------------------------------------------------------------- entry point

_Parser = Callable[[bytes, str, ParseContext], tuple[str, str | None, dict[str, Any]]]
_PARSERS: dict[str, _Parser] = {
    TEXT_MARKDOWN: parse_markdown,
    TEXT_HTML: parse_html,
    APPLICATION_PDF: parse_pdf,
    APPLICATION_DOCX: parse_docx,
    **{ct: parse_image for ct in IMAGES},
    **{ct: parse_plain for ct in _PLAIN_TYPES},
}


def parse_document(
    data: bytes,
    filename: str,
    content_type: str | None = None,
    ctx: ParseContext | None = None,
) -> ParsedDocument:
    """Parse an uploaded file into normalised text (and tables, with ``ctx.find_tables``).

    ``content_type`` is the MIME type the client declared, if any; the file extension wins
    over it (see ``detect_content_type``). Raises ``UnsupportedMediaType`` for file types we
    cannot read and ``InvalidArgument`` for empty, binary, damaged, encrypted or text-less
    files.
    """
    resolved = detect_content_type(filename, content_type)
    name = basename(filename) or "upload"
    if not data:
        raise InvalidArgument(
            f"'{name}' is empty (0 bytes) and contains no text. Upload a file with some text."
        )
    ctx = ctx or ParseContext()
    text, title, metadata = _PARSERS[resolved](data, basename(filename), ctx)
    if not text.strip() and ctx.tables:
        text = ""  # a document that is one table: its chunks are the table's
    elif not text.strip():
        raise InvalidArgument(
            f"'{name}' contains no text. Upload a file with readable text content."
        )
    metadata = {"filename": name, **metadata}
    return ParsedDocument(
        text=text,
        title=title or stem(filename),
        content_type=resolved,
        metadata=metadata,
        tables=ctx.tables,
        warnings=ctx.warnings,
    )
