"""Ruled tables in a scanned page's image: the page's skew, and the grid of each table's cells.

OCR of a whole page reads a table's rules as characters beside its cells (`Licensing % 3,702
6,829 LAGAN)` for `7,841`), and whitening the rules before a whole-page read splits row labels
from their values. So, as layout-aware parsers do (RAGFlow's DeepDoc, nv-ingest), the table is
found in the image first and read cell by cell (scan_tables); this module finds it.

Rules are long straight runs of ink: a morphological opening with a line (a run of at least
`rule_length` dark pixels) along rows keeps horizontal rules and drops text, whose strokes are
short; along columns it keeps vertical rules. A table is a set of horizontal and vertical rules
that cross one another, at least three each way (two rows, two columns: tables.MIN_ROWS and
MIN_COLS). Pure numpy, on an A4 page at 200 dpi: ~20 ms to tell a page without rules
(may_hold_a_table), 0.1-0.3 s to deskew a page with them and find its grids.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

# Ink (255 - gray) summed across three pixels that counts as a rule: a 0.5 pt rule at 200 dpi,
# anti-aliased over two rows (gray ~200 each, ink ~110 together) passes; a scan's background
# noise after the 3x3 median (ink ~10 a pixel) does not.
_RULE_INK = 90
# A pixel darker than this is text ink (for the caption's line and a cell's content).
TEXT_DARK = 160
# Skew searched in this range (degrees), coarse then fine: a scanner's feed tilts a page by a
# degree or two; beyond that a page is rotated, not skewed, and OCR handles it.
_MAX_SKEW = 3.0
_COARSE_STEP = 0.2
_FINE_STEP = 0.02
# A skew under this is left alone (rotating costs ~50 ms and blurs a little).
MIN_SKEW = 0.05
# A rule's mask is its run's middle rows; its blurred edges reach this many pixels further.
RULE_MARGIN = 2
# Rules need at least this many rows and columns crossing (three rules: two rows or columns).
_MIN_RULES = 3


@dataclass(frozen=True)
class Rule:
    """A straight rule: `lo`-`hi` its thickness across (rows of a horizontal rule), `start`-
    `end` its extent along it; all in pixels, end-exclusive."""

    lo: int
    hi: int
    start: int
    end: int

    @property
    def centre(self) -> float:
        return (self.lo + self.hi) / 2

    def covers(self, position: float, tolerance: int) -> bool:
        return self.start - tolerance <= position <= self.end + tolerance


@dataclass
class Grid:
    """A ruled table's grid: the bands of its horizontal rules (top to bottom) and vertical
    rules (left to right), each band the rules at one position (a rule broken by noise is
    several), and the cells they make, merged where a separator is missing."""

    rows: list[list[Rule]]
    cols: list[list[Rule]]
    tolerance: int
    cells: list[list[tuple[int, int, int, int] | None]] = field(default_factory=list)

    @property
    def bbox(self) -> tuple[int, int, int, int]:
        """(left, top, right, bottom) over the outer rules, end-exclusive."""
        return (
            min(r.lo for r in self.cols[0]),
            min(r.lo for r in self.rows[0]),
            max(r.hi for r in self.cols[-1]),
            max(r.hi for r in self.rows[-1]),
        )

    def _has(self, band: list[Rule], position: float) -> bool:
        return any(r.covers(position, self.tolerance) for r in band)

    def build_cells(self, inset: int) -> None:
        """Each cell's box inside its rules, `inset` pixels clear of them: cells[r][c], or
        None for a cell that a merged cell to its left or above covers (as pdfplumber gives
        a spanned cell: the text in the first, nothing in the others)."""
        n_rows, n_cols = len(self.rows) - 1, len(self.cols) - 1
        ys = [_edges(band) for band in self.rows]
        xs = [_edges(band) for band in self.cols]
        taken = [[False] * n_cols for _ in range(n_rows)]
        self.cells = [[None] * n_cols for _ in range(n_rows)]
        for r in range(n_rows):
            for c in range(n_cols):
                if taken[r][c]:
                    continue
                mid_y = (ys[r][1] + ys[r + 1][0]) / 2
                right = c + 1
                while right < n_cols and not self._has(self.cols[right], mid_y):
                    right += 1
                mid_x = (xs[c][1] + xs[c + 1][0]) / 2
                bottom = r + 1
                while bottom < n_rows and not self._has(self.rows[bottom], mid_x):
                    bottom += 1
                for rr in range(r, bottom):
                    for cc in range(c, right):
                        taken[rr][cc] = True
                box = (
                    xs[c][1] + inset,
                    ys[r][1] + inset,
                    xs[right][0] - inset,
                    ys[bottom][0] - inset,
                )
                if box[2] > box[0] and box[3] > box[1]:
                    self.cells[r][c] = box


def _edges(band: list[Rule]) -> tuple[int, int]:
    return min(r.lo for r in band), max(r.hi for r in band)


def paper_level(gray: np.ndarray) -> float:
    """The page's paper: its median gray (most of a page is paper)."""
    return float(np.median(gray[::4, ::4]))  # a sixteenth of the pixels tells it as well


def levelled(gray: np.ndarray, paper: float) -> np.ndarray:
    """The page scaled so that its paper (`paper`, from paper_level) is white (255) and
    black stays black. The thresholds here and in scan_tables are set for white paper; a scan
    of grey or yellowed paper would otherwise be all "ink". (Stretching the ink side to black
    as well was tried: on a page of sparse text the darkest percentile is noise, and the
    stretch made the noise rules.)"""
    if paper >= 250 or paper < 64:
        return gray  # white already, or a dark page (a photo, a negative): left as it is
    scaled = gray.astype(np.float32) * (255.0 / paper)
    return np.clip(scaled, 0, 255).astype(np.uint8)


def rule_length(gray: np.ndarray) -> int:
    """The shortest run that counts as a rule: about a thirtieth of the page's shorter side
    (55 px on A4 at 200 dpi), two to three text lines' height, so no letter's stroke is one;
    a table's row or column is longer than that."""
    return max(24, min(gray.shape) // 30)


def skew_angle(gray: np.ndarray) -> float:
    """The page's skew in degrees: the angle (Pillow's, counter-clockwise) to rotate it by so
    that its text lines and rules run level. The angle at which the ink's row profile is
    sharpest (sum of squared row counts), searched coarse then fine."""
    ys, xs = np.nonzero(gray < TEXT_DARK)
    if len(ys) < 100:
        return 0.0
    ys, xs = ys.astype(np.float64), xs.astype(np.float64)

    def sharpness(angle: float) -> float:
        theta = np.deg2rad(angle)
        rows = np.round(ys * np.cos(theta) - xs * np.sin(theta)).astype(np.int64)
        counts = np.bincount(rows - rows.min()).astype(np.float64)
        return float((counts**2).sum())

    coarse = np.arange(-_MAX_SKEW, _MAX_SKEW + 1e-9, _COARSE_STEP)
    best = float(coarse[int(np.argmax([sharpness(a) for a in coarse]))])
    fine = np.arange(best - _COARSE_STEP, best + _COARSE_STEP + 1e-9, _FINE_STEP)
    return float(fine[int(np.argmax([sharpness(a) for a in fine]))])


def horizontal_rules(gray: np.ndarray, length: int) -> np.ndarray:
    """A boolean mask of the pixels on runs of ink at least `length` long along rows (pass
    the transposed page for vertical rules): an opening, erosion by a line of `length`
    (_full_windows) then dilation by it."""
    height, width = gray.shape
    full = _full_windows(_inked(gray), length)
    if full is None:
        return np.zeros((height, width), bool)
    # Pixel j is on a run when a full window starts in [j - length + 1, j].
    starts = np.zeros((height, width + 1), np.int16)
    np.cumsum(full, axis=1, out=starts[:, 1 : full.shape[1] + 1])
    starts[:, full.shape[1] + 1 :] = starts[:, full.shape[1] : full.shape[1] + 1]
    covered = np.empty((height, width), bool)
    covered[:, :length] = starts[:, 1 : length + 1] > 0
    covered[:, length:] = (starts[:, length + 1 :] - starts[:, 1 : width - length + 1]) > 0
    return covered


def may_hold_a_table(gray: np.ndarray) -> bool:
    """Whether a levelled page, skewed or not, has runs of ink as long as a rule's both
    across and down: a cheap test (some 30 ms on A4 at 200 dpi) that spares a page of prose
    the deskewing and the grid search. A rule tilted by a scanner's degree or two still has
    such runs in the three-pixel sum (it shifts a pixel every 30-60); a noisy page's blurred
    text has some across (along a line's baseline), but not down, where lines are apart."""
    length = rule_length(gray)
    for page in (gray, gray.T):
        full = _full_windows(_inked(page), length)
        if full is None or not full.any():
            return False
    return True


def _inked(gray: np.ndarray) -> np.ndarray:
    """Where the ink summed over three rows (a pixel, the one above, the one below) is a
    rule's: a thin rule anti-aliased over two rows, or one climbing a row over a residual
    skew, stays one run."""
    ink = 255 - gray.astype(np.int16)
    across = ink.copy()
    across[1:] += ink[:-1]
    across[:-1] += ink[1:]
    return across >= _RULE_INK


def _full_windows(mask: np.ndarray, length: int) -> np.ndarray | None:
    """full[:, j]: whether mask[:, j : j + length] is all set (by cumulative sums); None
    when the rows are shorter than `length`."""
    height, width = mask.shape
    if width < length:
        return None
    sums = np.zeros((height, width + 1), np.int16)  # rows are at most ocr.MAX_SIDE_PX long
    np.cumsum(mask, axis=1, out=sums[:, 1:])
    return (sums[:, length:] - sums[:, :-length]) == length


def _rules(mask: np.ndarray, length: int) -> list[Rule]:
    """The rules of a horizontal mask: bands of consecutive rows with mask pixels, each cut
    into its runs along the rows. A band thicker than half a rule's length is a filled area
    (a photo, a black bar), not a rule."""
    rows = np.flatnonzero(mask.any(axis=1))
    rules: list[Rule] = []
    if not len(rows):
        return rules
    breaks = np.flatnonzero(np.diff(rows) > 1)
    for lo, hi in zip(
        np.concatenate(([rows[0]], rows[breaks + 1])),
        np.concatenate((rows[breaks] + 1, [rows[-1] + 1])),
        strict=True,
    ):
        if hi - lo > length // 2:
            continue
        along = np.concatenate(([False], mask[lo:hi].any(axis=0), [False]))
        edges = np.flatnonzero(np.diff(along.astype(np.int8)))
        for start, end in zip(edges[::2], edges[1::2], strict=True):
            if end - start >= length:
                rules.append(Rule(int(lo), int(hi), int(start), int(end)))
    return rules


def find_grids(gray: np.ndarray) -> tuple[list[Grid], np.ndarray]:
    """The ruled tables of a level (deskewed) page, top to bottom, each with its cells, and
    the mask of every rule's pixels (to whiten them in what is read: a rule's blurred edges
    outside the mask are lighter than text and vanish when the crops are binarized)."""
    length = rule_length(gray)
    horizontal = horizontal_rules(gray, length)
    vertical = horizontal_rules(gray.T, length)  # transposed: its rows are the page's columns
    h_rules = _rules(horizontal, length)
    v_rules = _rules(vertical, length)
    tolerance = max(3, length // 12)
    parent = list(range(len(h_rules) + len(v_rules)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, h in enumerate(h_rules):
        for j, v in enumerate(v_rules):
            if h.covers(v.centre, tolerance) and v.covers(h.centre, tolerance):
                parent[root(i)] = root(len(h_rules) + j)
    groups: dict[int, tuple[list[Rule], list[Rule]]] = {}
    for i, h in enumerate(h_rules):
        groups.setdefault(root(i), ([], []))[0].append(h)
    for j, v in enumerate(v_rules):
        groups.setdefault(root(len(h_rules) + j), ([], []))[1].append(v)
    grids = []
    inset = max(2, length // 20)
    for hs, vs in groups.values():
        rows, cols = _bands(hs, tolerance), _bands(vs, tolerance)
        if len(rows) >= _MIN_RULES and len(cols) >= _MIN_RULES:
            grid = Grid(rows, cols, tolerance)
            grid.build_cells(inset)
            grids.append(grid)
    grids.sort(key=lambda g: g.bbox[1])
    return grids, horizontal | vertical.T


def grow(mask: np.ndarray, by: int) -> np.ndarray:
    """`mask` dilated by `by` pixels each way (a square)."""
    out = mask.copy()
    for _ in range(by):
        grown = out.copy()
        grown[1:] |= out[:-1]
        grown[:-1] |= out[1:]
        grown[:, 1:] |= out[:, :-1]
        grown[:, :-1] |= out[:, 1:]
        out = grown
    return out


def _bands(rules: list[Rule], tolerance: int) -> list[list[Rule]]:
    """Rules grouped by position across (pieces of one rule broken by noise, or a double
    rule, are one band), in order."""
    bands: list[list[Rule]] = []
    for rule in sorted(rules, key=lambda r: r.centre):
        if bands and rule.lo <= max(r.hi for r in bands[-1]) + tolerance:
            bands[-1].append(rule)
        else:
            bands.append([rule])
    return bands


def caption_box(
    gray: np.ndarray, grid: Grid, rules: np.ndarray
) -> tuple[int, int, int, int] | None:
    """The box (left, top, right, bottom) of the text line right above a table, its caption
    as the text-PDF path takes it (pdf_tables._caption): a line starting no further above the
    table than one of its rows is high. None when there is no such line. The box reaches
    down through the table's top rule: a caption set close above it has its descenders on
    the rule, and what of them lies beside the rule's pixels helps read it."""
    top = grid.bbox[1]
    ys = [_edges(band) for band in grid.rows]
    row_height = int(np.median([b[0] - a[1] for a, b in itertools.pairwise(ys)]))
    ink = (gray[:top] < TEXT_DARK) & ~grow(rules, RULE_MARGIN)[:top]
    profile = ink.sum(axis=1)
    limit = max(0, top - row_height)
    # A row with a few dark pixels is noise between lines, not a line: a row is blank under
    # a twentieth of the ink of the busiest row just above the table (a text line's middle
    # rows hold hundreds of dark pixels, a noisy scan's blank rows a handful).
    near = profile[max(0, top - 3 * row_height) : top]
    blank_below = max(3, int(near.max(initial=0)) // 20)
    y = top - 1
    while y >= limit and profile[y] < blank_below:
        y -= 1
    if y < limit:
        return None
    bottom = y + 1
    blank = 0
    while y > 0 and blank < 2:
        y -= 1
        blank = blank + 1 if profile[y] < blank_below else 0
    line_top = y + blank
    if bottom - line_top > 2 * row_height:
        return None  # not one line: a figure or a block of text
    # Its left and right ends: where ink is dense along the line, not a lone speck's column.
    along = ink[line_top:bottom].sum(axis=0)
    window = max(3, row_height // 4)
    columns = np.flatnonzero(np.convolve(along, np.ones(window), "same") >= 4)
    if not len(columns):
        return None
    return (int(columns[0]), line_top, int(columns[-1]) + 1, ys[0][1])
