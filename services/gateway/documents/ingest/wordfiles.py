"""DOCX uploads (Word 2007 or later): paragraphs and tables in document order, the title from
the core properties or the first Title/Heading 1 paragraph; data tables taken out as tables,
layout tables (one holding another) kept as lines of cells."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from services.gateway.documents.ingest.normalize import normalize_whitespace
from services.gateway.documents.ingest.tables import MAX_CAPTION_CHARS, Table, make_table
from shared.errors import InvalidArgument

if TYPE_CHECKING:
    from services.gateway.documents.ingest.context import ParseContext


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
        if len(text) <= MAX_CAPTION_CHARS and (
            style == "Caption" or text.lower().startswith("table")
        ):
            caption = text
    return make_table(rows, caption)


def parse_docx(data: bytes, name: str, ctx: ParseContext) -> tuple[str, str | None, dict[str, Any]]:
    import docx
    from docx.table import Table as DocxTable
    from docx.text.paragraph import Paragraph

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
