"""A scanned page's ruled tables laid out to be read cell by cell in one OCR pass.

scan_grid finds each table's grid. Each cell is cropped clear of its rules (what is left of a
rule is whitened), trimmed to its ink, and the crops of all the page's tables (each caption
first) are stacked in one image, a line apiece; Tesseract reads that image once (its TSV
gives every word's box) and each word goes back to the cell whose line it sits on. The
page's prose is read apart, from the page with its tables and captions whitened.

A Tesseract pass per cell would pay its page set-up thirty-odd times a table; one pass over
the stack costs less than a pass over the page. No rule pixel is in a crop, so
nothing is read beside a cell's text, and a row label cannot be split from its values: each
cell is its own line. The stack is enlarged and binarized (see _LINE_PX): at a 200 dpi scan's
size Tesseract read a thousands comma as a full stop, or lost it, in a cell out of thirty.
Number slips and a first letter in the wrong case that a column contradicts are mended
(consistent_numbers, consistent_case).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from services.gateway.documents.ingest import scan_grid

if TYPE_CHECKING:
    from PIL.Image import Image

# A crop with fewer ink pixels than this is an empty cell (a speck or two are left of noise).
_MIN_INK_PX = 12
# White kept around the stack, and between its crops (pixels before enlarging): Tesseract
# wants a margin, and a gap it cannot bridge keeps one cell's line from running into the next.
_PAD_PX = 10
_GAP_PX = 24
# The stack is enlarged so that its median crop (a line of digits, mostly) is this tall, by a
# factor between 1 and _MAX_SCALE (~1.5x for 10 pt text scanned at 200 dpi), then binarized
# at _BINARY (the page levelled: paper 255). Measured on 27 table pages of bench/docset.py's
# (clean and noisy scans of three seeds, rendered from their PDFs as the gateway renders
# them, 972 cells): 0 cells misread, against 1 at 2x and 180, 3 at 2x and 160, 5 at 1.5x and
# 160 (and 10 of 540 at 2x not binarized); docs/history/benchmarks-2026-11.md.
_LINE_PX = 33
_MAX_SCALE = 3.0
_BINARY = 180
# A slot of the stack: (table, row, column); a caption is row -1.
Slot = tuple[int, int, int]
Box = tuple[int, int, int, int]  # left, top, right, bottom


@dataclass
class Stack:
    """Crops stacked top to bottom in one image, and which cell each line is."""

    image: Image
    slots: list[Slot] = field(default_factory=list)
    tops: list[float] = field(default_factory=list)  # each crop's top in the image
    bottoms: list[float] = field(default_factory=list)
    gap: float = _GAP_PX

    def words(self, tsv: str) -> dict[Slot, str]:
        """Each slot's text from Tesseract's TSV of the image: a word goes to the crop its
        box's middle falls in (or the nearer one, in a gap), words in Tesseract's order."""
        texts: dict[Slot, list[str]] = {}
        for word, middle in _tsv_words(tsv):
            i = bisect.bisect_right(self.tops, middle) - 1
            if i < 0 or middle > self.bottoms[i] + self.gap / 2:
                i += 1  # above the first crop, or in the lower half of a gap
            if 0 <= i < len(self.slots):
                texts.setdefault(self.slots[i], []).append(word)
        return {slot: " ".join(words) for slot, words in texts.items()}


@dataclass
class ScanLayout:
    """A scanned page split for reading: its prose (tables and captions whitened) and the
    stack of its tables' cells, with each table's shape."""

    prose: Image
    stack: Stack
    shapes: list[tuple[int, int]]  # (rows, columns) per table

    def tables(self, tsv: str) -> list[tuple[str, list[list[str]]]]:
        """(caption, rows of cell texts) per table, from Tesseract's TSV of the stack."""
        texts = self.stack.words(tsv)
        out = []
        for t, (n_rows, n_cols) in enumerate(self.shapes):
            rows = [[texts.get((t, r, c), "") for c in range(n_cols)] for r in range(n_rows)]
            out.append((texts.get((t, -1, 0), ""), consistent_case(consistent_numbers(rows))))
        return out


def layout(image: Image) -> ScanLayout | None:
    """The page (grayscale and despeckled: ocr.prepare) levelled and deskewed, its ruled
    tables found and stacked; None when it has none (the caller reads the page whole)."""
    from PIL import Image as PILImage

    page = np.asarray(image)
    gray = scan_grid.levelled(page, scan_grid.paper_level(page))
    if not scan_grid.may_hold_a_table(gray):
        return None
    angle = scan_grid.skew_angle(gray)
    if abs(angle) >= scan_grid.MIN_SKEW:
        gray = _rotated(gray, angle)
    grids, rules = scan_grid.find_grids(gray)
    if not grids:
        return None
    prose = gray.copy()
    boxes: list[tuple[Slot, Box | None]] = []
    for t, grid in enumerate(grids):
        caption = scan_grid.caption_box(gray, grid, rules)
        for left, top, right, bottom in filter(None, (grid.bbox, caption)):
            m = scan_grid.RULE_MARGIN
            prose[max(0, top - m) : bottom + m, max(0, left - m) : right + m] = 255
        boxes.append(((t, -1, 0), caption))
        boxes += [((t, r, c), box) for r, row in enumerate(grid.cells) for c, box in enumerate(row)]
    stack = _stack(np.where(rules, np.uint8(255), gray), boxes)
    if stack is None:
        return None
    shapes = [(len(g.cells), len(g.cells[0])) for g in grids]
    return ScanLayout(PILImage.fromarray(prose), stack, shapes)


def _rotated(gray: np.ndarray, angle: float) -> np.ndarray:
    from PIL import Image as PILImage

    image = PILImage.fromarray(gray)
    return np.asarray(image.rotate(angle, resample=PILImage.Resampling.BICUBIC, fillcolor=255))


def _stack(clean: np.ndarray, boxes: list[tuple[Slot, Box | None]]) -> Stack | None:
    """The non-empty boxes of `clean` (the page, rules whitened) trimmed to their ink,
    stacked, enlarged and binarized; None when every cell is empty."""
    from PIL import Image as PILImage

    crops: list[np.ndarray] = []
    slots: list[Slot] = []
    for slot, box in boxes:
        if box is None:
            continue
        left, top, right, bottom = box
        crop = _trimmed(clean[top:bottom, left:right])
        if crop is not None:
            crops.append(crop)
            slots.append(slot)
    if not any(r >= 0 for _, r, _ in slots):
        return None
    width = max(c.shape[1] for c in crops) + 2 * _PAD_PX
    height = sum(c.shape[0] for c in crops) + _GAP_PX * (len(crops) - 1) + 2 * _PAD_PX
    canvas = np.full((height, width), 255, np.uint8)
    tops: list[int] = []
    y = _PAD_PX
    for crop in crops:
        canvas[y : y + crop.shape[0], _PAD_PX : _PAD_PX + crop.shape[1]] = crop
        tops.append(y)
        y += crop.shape[0] + _GAP_PX
    scale = min(_MAX_SCALE, max(1.0, _LINE_PX / float(np.median([c.shape[0] for c in crops]))))
    image = PILImage.fromarray(canvas)
    if scale > 1.0:
        size = (round(width * scale), round(height * scale))
        image = image.resize(size, PILImage.Resampling.BICUBIC)
    image = image.point(lambda v: 255 if v > _BINARY else 0)
    return Stack(
        image,
        slots,
        [t * scale for t in tops],
        [(t + c.shape[0]) * scale for t, c in zip(tops, crops, strict=True)],
        _GAP_PX * scale,
    )


def _trimmed(crop: np.ndarray) -> np.ndarray | None:
    """The crop cut to the box of its ink, or None when it holds none."""
    ink = crop < scan_grid.TEXT_DARK
    if int(ink.sum()) < _MIN_INK_PX:
        return None
    rows = np.flatnonzero(ink.any(axis=1))
    cols = np.flatnonzero(ink.any(axis=0))
    return crop[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]


def _tsv_words(tsv: str) -> list[tuple[str, float]]:
    """(text, vertical middle) of each word in Tesseract's TSV (a row per page, block, line
    and word, level 5 the words), in its order."""
    words = []
    for line in tsv.splitlines():
        parts = line.split("\t")
        if len(parts) < 12 or parts[0] != "5" or not parts[11].strip():
            continue
        top, height = int(parts[7]), int(parts[9])
        words.append((parts[11].strip(), top + height / 2))
    return words


_NUMBER = re.compile(r"[-(]?[$€£]?§?[\d,.]*\d[\d,.]*\)?%?")
_GROUPED = re.compile(r"[-(]?[$€£]?\d{1,3}(?:,\d{3})+(?:\.\d+)?\)?%?")
# A speck after a number read as a full stop or a comma: "2023.".
_TRAILING_STOP = re.compile(r"(?<=\d)[.,]$")
_STOP_FOR_COMMA = re.compile(r"([-(]?[$€£]?[1-9]\d{0,2})\.(\d{3})(\)?%?)")
# A number with a decimal point (and no thousands comma): "1.5", "8.803".
_DECIMAL = re.compile(r"[-(]?[$€£]?\d+\.\d+\)?%?")
# A whole number of four to six digits, which a column of grouped ones would write "1,177".
_UNGROUPED = re.compile(r"([-(]?[$€£]?)([1-9]\d{3,5})(\)?)")
# Tesseract's misreading of a 5 leading a number in a noisy scan: "§,212", "§53".
_SECTION_FOR_FIVE = re.compile(r"^([-(]?)§(?=[\d,.])")


def consistent_numbers(rows: list[list[str]]) -> list[list[str]]:
    """Cells with OCR's number slips undone where the table itself says what was meant. In
    a column of numbers, a "§" leading one is a 5 ("§,212") and a stop or comma ending one
    is a speck ("2023."). In a column whose numbers are grouped by thousands commas
    ("8,803"), a number with one full stop before three digits ("8.803") had its comma read
    as a stop: where two are grouped, or one is and no other decimal is in the column (a
    column does not mix "1,234" with values of three decimals); and where two are grouped,
    a body cell of four to six digits ("1177") lost its comma."""
    rows = [list(row) for row in rows]
    for c in range(len(rows[0]) if rows else 0):
        if sum(bool(_NUMBER.fullmatch(row[c])) for row in rows) < 2:
            continue
        for row in rows:
            if _NUMBER.fullmatch(row[c]):
                cell = _SECTION_FOR_FIVE.sub(r"\g<1>5", row[c])
                row[c] = _TRAILING_STOP.sub("", cell)
        grouped = sum(bool(_GROUPED.fullmatch(row[c])) for row in rows)
        decimals = [row[c] for row in rows if _DECIMAL.fullmatch(row[c])]
        stops_are_commas = grouped >= 2 or (
            grouped == 1 and all(_STOP_FOR_COMMA.fullmatch(d) for d in decimals)
        )
        for row in rows:
            if stops_are_commas and _STOP_FOR_COMMA.fullmatch(row[c]):
                row[c] = _STOP_FOR_COMMA.sub(r"\1,\2\3", row[c])
        if grouped >= 2:
            for row in rows[1:]:
                if _UNGROUPED.fullmatch(row[c]):
                    row[c] = _UNGROUPED.sub(_group_thousands, row[c])
    return rows


def _group_thousands(match: re.Match[str]) -> str:
    return f"{match[1]}{int(match[2]):,}{match[3]}"


# Letters whose capital is their small letter drawn larger (and i, whose dot a noisy scan
# blurs into a serif): Tesseract takes one for the other in a noisy cell ("industrial").
_CASE_BLIND = frozenset("ciosvwxz")


def consistent_case(rows: list[list[str]]) -> list[list[str]]:
    """Cells whose first letter OCR read in the wrong case, mended where the column says
    so: in a column whose other worded cells (two at least) all start with a capital, one
    starting with a small letter that looks like its capital ("industrial sensors") gets the
    capital. Other letters are left alone: "eBay" in a column of names stays."""
    rows = [list(row) for row in rows]
    for c in range(len(rows[0]) if rows else 0):
        starts = [row[c][:1] for row in rows if row[c][:1].isalpha()]
        small = [s for s in starts if s.islower()]
        if len(small) != 1 or len(starts) < 3 or small[0] not in _CASE_BLIND:
            continue
        for row in rows:
            if row[c][:1] == small[0]:
                row[c] = row[c][0].upper() + row[c][1:]
    return rows
