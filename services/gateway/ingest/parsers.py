"""Turn uploaded files into plain text.

``parse_document`` accepts the raw bytes of an upload plus its file name (and, optionally, the
MIME type the client declared) and returns a ``ParsedDocument`` whose ``text`` is ready to be
chunked: whitespace is normalised (runs of spaces collapsed, paragraph breaks kept as one blank
line), control characters are removed and the text is NFC-normalised.

Failures a client can fix are raised as domain errors: ``UnsupportedMediaType`` (HTTP 415) for
a file type we cannot read, ``InvalidArgument`` for an empty, binary, corrupt, encrypted or
text-less file. Every message names the file and says what to do.
"""

from __future__ import annotations

import codecs
import io
import logging
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from services.gateway.ingest.ocr import OcrOptions
from services.gateway.ingest.tables import Table, make_table
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
    "normalize_whitespace",
    "parse_document",
]

log = logging.getLogger(__name__)

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

# Reject text that decodes with more than this share of U+FFFD / control characters.
_MAX_JUNK_RATIO = 0.3


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


class PageCounter(Protocol):
    """Hears how many pages a paged document has and when each is read (job progress)."""

    def pages_found(self, count: int) -> None: ...

    def page_done(self) -> None: ...


@dataclass
class ParseContext:
    """What a parser may use besides the bytes (OCR and table settings, a page counter) and
    what it finds besides the text (tables, warnings)."""

    ocr: OcrOptions = field(default_factory=OcrOptions)
    find_tables: bool = True
    pages: PageCounter | None = None
    tables: list[Table] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def pages_found(self, count: int) -> None:
        if self.pages is not None:
            self.pages.pages_found(count)

    def page_done(self) -> None:
        if self.pages is not None:
            self.pages.page_done()


def _supported_list() -> str:
    return ", ".join(sorted(SUPPORTED))


def _basename(filename: str) -> str:
    """The last path component, whether the client sent a POSIX or a Windows path."""
    return filename.replace("\\", "/").rsplit("/", 1)[-1].strip()


def _extension(filename: str) -> str:
    name = _basename(filename)
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def _stem(filename: str) -> str:
    name = _basename(filename)
    dot = name.rfind(".")
    stem = name[:dot] if dot > 0 else name
    return stem.strip() or "untitled"


def _media_type(declared: str | None) -> str:
    """``'Text/HTML; charset=utf-8'`` -> ``'text/html'``."""
    if not declared:
        return ""
    return declared.split(";", 1)[0].strip().lower()


def detect_content_type(filename: str, declared: str | None) -> str:
    """The canonical content type of an upload: by file extension first, then by the MIME
    type the client declared. Raises ``UnsupportedMediaType`` when neither is supported."""
    by_extension = SUPPORTED.get(_extension(filename))
    if by_extension:
        return by_extension
    media_type = _media_type(declared)
    if media_type in SUPPORTED.values():
        return media_type
    if media_type in _MIME_ALIASES:
        return _MIME_ALIASES[media_type]
    what = f"'{_basename(filename)}'" if filename.strip() else "the upload"
    declared_note = f" (declared type {media_type!r})" if media_type else ""
    raise UnsupportedMediaType(
        f"Cannot ingest {what}{declared_note}: unsupported file type. Supported extensions: "
        f"{_supported_list()}. Convert the file to one of these formats and upload it again."
    )


# --------------------------------------------------------------------------- whitespace

# Characters removed outright: zero-width spaces/joiners, soft hyphen, BOM, word joiner.
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))
_HSPACE = re.compile(r"[^\S\n]+")  # any whitespace except newline
_LEADING_SPACE = re.compile(r"[^\S\n]*")
# C0/C1 control characters except tab and newline, and lone surrogates.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_BLANK_LINES = re.compile(r"\n{3,}")
_JUNK_CONTROL = re.compile(r"[\x01-\x08\x0b\x0e-\x1f\x7f]")


def _clean_chars(text: str) -> str:
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
    for raw in _clean_chars(text).split("\n"):
        if keep_indent:
            indent = _LEADING_SPACE.match(raw)
            end = indent.end() if indent else 0
            body = _HSPACE.sub(" ", raw[end:]).rstrip()
            lines.append(raw[:end].replace("\t", "    ") + body if body else "")
        else:
            lines.append(_HSPACE.sub(" ", raw).strip())
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n")


# --------------------------------------------------------------------------- plain text

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _decode_text(data: bytes, filename: str) -> tuple[str, str]:
    """Decode an upload's bytes; returns (text, encoding used)."""
    name = _basename(filename)
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding), encoding
            except UnicodeDecodeError:
                break  # a BOM followed by garbage: judge it like any other bytes below
    if b"\x00" in data:
        raise InvalidArgument(
            f"'{name}' looks like a binary file, not text (it contains NUL bytes). Upload a "
            f"text file saved as UTF-8, or one of: {_supported_list()}."
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


def _parse_plain(
    data: bytes, filename: str, ctx: ParseContext
) -> tuple[str, str | None, dict[str, Any]]:
    text, encoding = _decode_text(data, filename)
    return normalize_whitespace(text), None, {"encoding": encoding}


# --------------------------------------------------------------------------- markdown

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


def _parse_markdown(
    data: bytes, filename: str, ctx: ParseContext
) -> tuple[str, str | None, dict[str, Any]]:
    text, encoding = _decode_text(data, filename)
    text = _clean_chars(text).lstrip("\n")
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


# --------------------------------------------------------------------------- HTML

_HTML_DROP = frozenset(
    {
        "script", "style", "nav", "head", "noscript", "template", "svg", "canvas",
        "iframe", "object", "embed", "button", "select", "datalist", "map", "audio", "video",
    }
)  # fmt: skip
_HTML_BLOCK = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "caption", "dd", "details",
        "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form",
        "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "html", "legend",
        "li", "main", "ol", "p", "pre", "section", "summary", "table", "tbody", "tfoot",
        "thead", "ul",
    }
)  # fmt: skip
_HTML_LINE = frozenset({"br", "tr"})  # end a line, not a paragraph (after the element)
_HTML_CELL = frozenset({"td", "th"})
_PARA = "\x00P"  # sentinels in the piece list; NUL never survives into text
_LINE = "\x00L"
_CELL = "\x00C"
_WHITESPACE = re.compile(r"\s+")
_CELL_AT_LINE_END = re.compile(r"\x00C(?=(?:\s|\x00C)*(?:\x00[PL]|\Z))")


def _html_text(root: Any) -> str:
    """Text of a parsed HTML tree with block elements as paragraphs (iterative walk)."""
    from bs4.element import CData, NavigableString, PreformattedString, Tag

    pieces: list[str] = []
    # Stack items: a node to visit, or a string to emit once a tag's children are done.
    stack: list[Any] = [root]
    pre_depth = 0
    while stack:
        node = stack.pop()
        if isinstance(node, str) and not isinstance(node, NavigableString):
            if node == "/pre":
                pre_depth -= 1
            else:
                pieces.append(node)
            continue
        if isinstance(node, NavigableString):
            if isinstance(node, PreformattedString) and not isinstance(node, CData):
                continue  # comments, doctype, processing instructions
            text = str(node)
            if pre_depth:
                pieces.append(text.replace("\n", _LINE))
            else:
                pieces.append(_WHITESPACE.sub(" ", text))
            continue
        if not isinstance(node, Tag):
            continue
        name = (node.name or "").lower()
        if name in _HTML_DROP or node.get("hidden") is not None:
            continue
        if name in _HTML_BLOCK:
            pieces.append(_PARA)
            stack.append(_PARA)
        elif name in _HTML_LINE:
            stack.append(_LINE)
        elif name in _HTML_CELL:
            stack.append(_CELL)
        elif name == "img" and node.get("alt"):
            pieces.append(f" {node['alt']} ")
        if name == "pre":
            pre_depth += 1
            stack.append("/pre")
        stack.extend(reversed(list(node.children)))
    out = "".join(pieces)
    # Cells are separated by " | "; the separator after a row's last cell is dropped.
    out = _CELL_AT_LINE_END.sub("", out).replace(_CELL, " | ")
    out = out.replace(_PARA, "\n\n").replace(_LINE, "\n")
    return normalize_whitespace(out)


def _parse_html(
    data: bytes, filename: str, ctx: ParseContext
) -> tuple[str, str | None, dict[str, Any]]:
    from bs4 import BeautifulSoup

    name = _basename(filename)
    if b"\x00" in data and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise InvalidArgument(
            f"'{name}' looks like a binary file, not HTML (it contains NUL bytes). Upload the "
            "page saved as an .html text file."
        )
    try:
        soup = BeautifulSoup(data, "lxml")
    except Exception as exc:  # lxml/bs4 raise many types on hostile input
        raise InvalidArgument(
            f"'{name}' could not be parsed as HTML ({type(exc).__name__}). Check the file is a "
            "web page saved as HTML and upload it again."
        ) from exc
    metadata: dict[str, Any] = {}
    title: str | None = None
    if soup.title and soup.title.string:
        title = " ".join(soup.title.string.split()) or None
    if not title:
        h1 = soup.find("h1")
        if h1:
            title = " ".join(h1.get_text(" ").split()) or None
    html_tag = soup.find("html")
    if html_tag is not None and html_tag.get("lang"):
        metadata["lang"] = str(html_tag["lang"])
    if soup.original_encoding:
        metadata["encoding"] = soup.original_encoding
    if ctx.find_tables:
        _take_html_tables(soup, ctx)
    return _html_text(soup), title, metadata


def _take_html_tables(soup: Any, ctx: ParseContext) -> None:
    """Moves each data table (one without a table inside: those are layout) out of the page
    into ctx.tables; a 'table' of one row or one column stays in the text."""
    for element in soup.find_all("table"):
        if element.find("table") is not None or element.find_parent("table") is not None:
            continue
        rows = [
            [cell.get_text(" ") for cell in tr.find_all(["th", "td"])]
            for tr in element.find_all("tr")
        ]
        caption_tag = element.find("caption")
        caption = caption_tag.get_text(" ") if caption_tag is not None else ""
        if not caption:
            caption = _caption_before(element)
        table = make_table(rows, caption)
        if table is not None:
            ctx.tables.append(table)
            element.decompose()


def _caption_before(element: Any) -> str:
    """A short heading or paragraph right before a table, which names it."""
    previous = element.find_previous_sibling()
    if previous is None or previous.name not in ("h1", "h2", "h3", "h4", "h5", "h6", "p"):
        return ""
    text = " ".join(previous.get_text(" ").split())
    return text if 0 < len(text) <= _MAX_CAPTION_CHARS else ""


# --------------------------------------------------------------------------- PDF, images

# A paragraph longer than this before a table is text about it, not its caption.
_MAX_CAPTION_CHARS = 160


def _parse_pdf(
    data: bytes, filename: str, ctx: ParseContext
) -> tuple[str, str | None, dict[str, Any]]:
    from services.gateway.ingest.pdf import parse_pdf

    return parse_pdf(data, _basename(filename), ctx)


def _parse_image(
    data: bytes, filename: str, ctx: ParseContext
) -> tuple[str, str | None, dict[str, Any]]:
    from services.gateway.ingest.images import parse_image

    return parse_image(data, _basename(filename), ctx)


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


# --------------------------------------------------------------------------- DOCX


def _docx_table_lines(table: Any) -> Iterator[str]:
    """One line per row, cells separated by ' | '; merged cells appear once; nested tables
    follow their cell's text."""
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        nested: list[str] = []
        for cell in row.cells:
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(p.text.strip() for p in cell.paragraphs if p.text.strip()))
            for inner in cell.tables:
                nested.extend(_docx_table_lines(inner))
        line = " | ".join(c for c in cells if c)
        if line:
            yield line
        yield from nested


def _docx_table(table: Any, previous: Any) -> Table | None:
    """A DOCX table as a Table (merged cells once); None for a layout table (one holding
    another) or one too small to be a table. Its caption is the paragraph before it when that
    is in the Caption style or starts with "Table"."""
    from docx.text.paragraph import Paragraph

    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if cell.tables:
                return None
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(p.text.strip() for p in cell.paragraphs if p.text.strip()))
        rows.append(cells)
    caption = ""
    if isinstance(previous, Paragraph):
        text = previous.text.strip()
        style = (previous.style.name if previous.style is not None else "") or ""
        if len(text) <= _MAX_CAPTION_CHARS and (
            style == "Caption" or text.lower().startswith("table")
        ):
            caption = text
    return make_table(rows, caption)


def _parse_docx(
    data: bytes, filename: str, ctx: ParseContext
) -> tuple[str, str | None, dict[str, Any]]:
    import docx
    from docx.table import Table as DocxTable
    from docx.text.paragraph import Paragraph

    name = _basename(filename)
    if not data.startswith(b"PK"):
        raise InvalidArgument(
            f"'{name}' is not a .docx file (Word 2007 or later). Open it in a word processor, "
            "save it as .docx and upload it again."
        )
    try:
        document = docx.Document(io.BytesIO(data))
        blocks: list[str] = []
        title: str | None = None
        paragraphs = tables = 0
        previous: Any = None  # the block before a table, which may be its caption
        for item in document.iter_inner_content():
            if isinstance(item, Paragraph):
                text = item.text.strip()
                if not text:
                    continue
                previous = item
                paragraphs += 1
                style = (item.style.name if item.style is not None else "") or ""
                if title is None and style in ("Title", "Heading 1"):
                    title = text
                blocks.append(text)
            elif isinstance(item, DocxTable):
                tables += 1
                table = _docx_table(item, previous) if ctx.find_tables else None
                if table is not None:
                    ctx.tables.append(table)
                    continue
                rows = "\n".join(_docx_table_lines(item))
                if rows:
                    blocks.append(rows)
            previous = item
        props = document.core_properties
        prop_title = " ".join((props.title or "").split())
        author = " ".join((props.author or "").split())
    except Exception as exc:  # zipfile, lxml and KeyError failures on damaged packages
        raise InvalidArgument(
            f"'{name}' could not be read as a .docx document; the file looks damaged. Open it "
            "in a word processor, save it again as .docx and upload it again."
        ) from exc
    metadata: dict[str, Any] = {"paragraphs": paragraphs, "tables": tables}
    if author:
        metadata["author"] = author
    return normalize_whitespace("\n\n".join(blocks)), prop_title or title, metadata


# --------------------------------------------------------------------------- entry point

_Parser = Callable[[bytes, str, ParseContext], tuple[str, str | None, dict[str, Any]]]
_PARSERS: dict[str, _Parser] = {
    TEXT_MARKDOWN: _parse_markdown,
    TEXT_HTML: _parse_html,
    APPLICATION_PDF: _parse_pdf,
    APPLICATION_DOCX: _parse_docx,
    **{ct: _parse_image for ct in IMAGES},
    **{ct: _parse_plain for ct in _PLAIN_TYPES},
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
    name = _basename(filename) or "upload"
    if not data:
        raise InvalidArgument(
            f"'{name}' is empty (0 bytes) and contains no text. Upload a file with some text."
        )
    ctx = ctx or ParseContext()
    text, title, metadata = _PARSERS[resolved](data, filename, ctx)
    if not text.strip() and ctx.tables:
        text = ""  # a document that is one table: its chunks are the table's
    elif not text.strip():
        raise InvalidArgument(
            f"'{name}' contains no text. Upload a file with readable text content."
        )
    metadata = {"filename": name, **metadata}
    return ParsedDocument(
        text=text,
        title=title or _stem(filename),
        content_type=resolved,
        metadata=metadata,
        tables=ctx.tables,
        warnings=ctx.warnings,
    )
