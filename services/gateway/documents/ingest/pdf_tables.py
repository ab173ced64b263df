"""Tables on a text-layer PDF page, found by pdfplumber's table finder on what PDFium reads.

pdfplumber parses a page in Python (pdfminer): about 0.1 s a page on these CPUs, most of a
table page's ingest cost besides embedding. Its table finder needs only the page's characters
(text and box) and its ruling edges, and PDFium lists both in C in a few milliseconds. So the
page is read by PDFium, its characters and the straight horizontal and vertical segments of
its paths (lines, rectangle sides: pdfplumber's "edges") are handed to pdfplumber's
`TableFinder`, and the cells are read with pdfplumber's text extraction, as before.

Coordinates are pdfplumber's: points from the page's top-left corner, y growing downwards.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

from services.gateway.documents.ingest.tables import Table, make_table

# A path segment this long or longer can be a table's rule (pdfplumber's edge_min_length is 3).
MIN_RULE_PT = 3.0
# A segment is horizontal (vertical) when its ends differ by less than this in y (x).
_STRAIGHT_PT = 0.5
# Above a table, this many points are searched for its caption.
CAPTION_BAND_PT = 36
# Forms nest; deeper than this they are not searched for rules.
_MAX_FORM_DEPTH = 8


@dataclass
class PageLayout:
    """What the table finder reads of a page: characters and ruling edges (pdfplumber's
    object dictionaries), and the page's box."""

    width: float
    height: float
    chars: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        return (0.0, 0.0, self.width, self.height)

    def extract_words(self, **settings: Any) -> list[dict[str, Any]]:
        from pdfplumber.utils import extract_words

        return extract_words(self.chars, **settings)


def page_edges(page: Any, top: float, left: float) -> list[dict[str, Any]]:
    """The horizontal and vertical path segments of a PDFium page (and of the forms it
    draws) at least MIN_RULE_PT long, as pdfplumber edges. `top`/`left`: the page box's top
    and left in PDF coordinates."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    edges: list[dict[str, Any]] = []

    def walk(form: Any, parent: Any, depth: int) -> None:
        for obj in page.get_objects(max_depth=0, form=form):
            kind = obj.type
            if kind not in (pdfium_c.FPDF_PAGEOBJ_PATH, pdfium_c.FPDF_PAGEOBJ_FORM):
                continue
            matrix = obj.get_matrix() if parent is None else obj.get_matrix().multiply(parent)
            if kind == pdfium_c.FPDF_PAGEOBJ_FORM:
                if depth < _MAX_FORM_DEPTH:
                    walk(obj, matrix, depth + 1)
                continue
            for (x0, y0), (x1, y1) in _segments(obj.raw, pdfium_c, pdfium):
                ax, ay = matrix.on_point(x0, y0)
                bx, by = matrix.on_point(x1, y1)
                edge = _edge(ax - left, top - ay, bx - left, top - by)
                if edge is not None:
                    edges.append(edge)

    walk(None, None, 0)
    return edges


def _segments(raw: Any, pdfium_c: Any, pdfium: Any) -> list[tuple[tuple[float, float], ...]]:
    """The straight segments of a path object, in its own coordinates (curves are left out:
    no table is ruled with them)."""
    out: list[tuple[tuple[float, float], ...]] = []
    x, y = ctypes.c_float(), ctypes.c_float()
    start: tuple[float, float] | None = None
    previous: tuple[float, float] | None = None
    for i in range(pdfium_c.FPDFPath_CountSegments(raw)):
        segment = pdfium_c.FPDFPath_GetPathSegment(raw, i)
        if not pdfium_c.FPDFPathSegment_GetPoint(segment, x, y):
            continue
        point = (x.value, y.value)
        kind = pdfium_c.FPDFPathSegment_GetType(segment)
        if kind == pdfium_c.FPDF_SEGMENT_LINETO and previous is not None:
            out.append((previous, point))
        if kind == pdfium_c.FPDF_SEGMENT_MOVETO or start is None:
            start = point
        previous = point
        if pdfium_c.FPDFPathSegment_GetClose(segment) and start != point:
            out.append((point, start))  # a closed rectangle's fourth side
            previous = start
    return out


def _edge(x0: float, y0: float, x1: float, y1: float) -> dict[str, Any] | None:
    """A pdfplumber edge for a segment given top-down, or None when it is slanted or short."""
    left, right = min(x0, x1), max(x0, x1)
    top, bottom = min(y0, y1), max(y0, y1)
    if bottom - top < _STRAIGHT_PT and right - left >= MIN_RULE_PT:
        orientation, y = "h", (top + bottom) / 2
        top = bottom = y
    elif right - left < _STRAIGHT_PT and bottom - top >= MIN_RULE_PT:
        orientation, x = "v", (left + right) / 2
        left = right = x
    else:
        return None
    return {
        "x0": left,
        "x1": right,
        "top": top,
        "bottom": bottom,
        "doctop": top,
        "width": right - left,
        "height": bottom - top,
        "orientation": orientation,
        "object_type": "line",
    }


def page_chars(textpage: Any, top: float, left: float) -> list[dict[str, Any]]:
    """The page's characters with their font boxes (PDFium's loose boxes: a line's
    characters share top and bottom, as pdfplumber's do), as pdfplumber char dictionaries.
    Line breaks are left out; spaces stay (pdfplumber splits words at them), those PDFium
    infers between words set without one included."""
    import pypdfium2.raw as pdfium_c

    chars: list[dict[str, Any]] = []
    rect = pdfium_c.FS_RECTF()
    raw = textpage.raw
    for i in range(pdfium_c.FPDFText_CountChars(raw)):
        code = pdfium_c.FPDFText_GetUnicode(raw, i)
        if code < 32 or code in (0xFFFE, 0xFFFF) or 0xD800 <= code <= 0xDFFF:
            continue  # line breaks, and surrogate halves (rare: astral characters)
        if not pdfium_c.FPDFText_GetLooseCharBox(raw, i, rect) or rect.right <= rect.left:
            continue
        x0, x1 = rect.left - left, rect.right - left
        y0, y1 = top - rect.top, top - rect.bottom
        chars.append(
            {
                "text": chr(code),
                "x0": x0,
                "x1": x1,
                "top": y0,
                "bottom": y1,
                "doctop": y0,
                "width": x1 - x0,
                "height": y1 - y0,
                "upright": abs(pdfium_c.FPDFText_GetCharAngle(raw, i)) < 0.01,
            }
        )
    return chars


def find_tables(layout: PageLayout, number: int) -> tuple[list[Table], str] | None:
    """The tables on a page (`number`: 1-based, for their citations) and the page's text
    outside them and their captions; None when there is none. Ruled tables first; then tables
    ruled only between rows, their columns taken from the words' edges."""
    from pdfplumber.table import TableFinder

    found = TableFinder(layout, {}).tables  # type: ignore[arg-type]
    if not found:
        settings = {"vertical_strategy": "text", "horizontal_strategy": "lines"}
        found = TableFinder(layout, settings).tables  # type: ignore[arg-type]
    tables: list[Table] = []
    taken: list[tuple[float, float, float, float]] = []  # tables' and captions' boxes
    for candidate in found:
        x0, top, x1, bottom = candidate.bbox
        caption, caption_box = _caption(layout, top)
        table = make_table(candidate.extract(), caption, number)
        if table is not None:
            tables.append(table)
            taken.append((x0, top, x1, bottom))
            if caption_box is not None:
                taken.append(caption_box)
    if not tables:
        return None
    rest = [c for c in layout.chars if not any(_inside(c, box) for box in taken)]
    return tables, _text(rest)


def _caption(layout: PageLayout, table_top: float) -> tuple[str, tuple[float, ...] | None]:
    """The last line of text in the band above a table, and its box (that line is left out
    of the page's prose: the table chunk carries it)."""
    band_top = max(0.0, table_top - CAPTION_BAND_PT)
    band = [c for c in layout.chars if band_top <= c["top"] and c["bottom"] <= table_top + 1]
    if not band:
        return "", None
    last_top = max(c["top"] for c in band)
    line = [c for c in band if abs(c["top"] - last_top) <= 3]
    box = (
        min(c["x0"] for c in line),
        min(c["top"] for c in line),
        max(c["x1"] for c in line),
        max(c["bottom"] for c in line),
    )
    return _text(line), box


def _inside(char: dict[str, Any], box: tuple[float, ...]) -> bool:
    """Whether a character's centre is in `box` (pdfplumber's test for a cell's chars)."""
    x0, top, x1, bottom = box
    h_mid = (char["x0"] + char["x1"]) / 2
    v_mid = (char["top"] + char["bottom"]) / 2
    return x0 <= h_mid <= x1 and top <= v_mid <= bottom


def _text(chars: list[dict[str, Any]]) -> str:
    from pdfplumber.utils import extract_text

    return extract_text(chars) if chars else ""
