"""HTML uploads: the page's text with block elements as paragraphs (scripts, navigation and
hidden elements left out), its title, and its data tables taken out as tables."""

from __future__ import annotations

import codecs
import re
from typing import TYPE_CHECKING, Any

from services.gateway.documents.ingest.normalize import normalize_whitespace
from services.gateway.documents.ingest.tables import MAX_CAPTION_CHARS, make_table
from shared.errors import InvalidArgument

if TYPE_CHECKING:
    from services.gateway.documents.ingest.context import ParseContext

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


def parse_html(data: bytes, name: str, ctx: ParseContext) -> tuple[str, str | None, dict[str, Any]]:
    from bs4 import BeautifulSoup

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
    return text if 0 < len(text) <= MAX_CAPTION_CHARS else ""
