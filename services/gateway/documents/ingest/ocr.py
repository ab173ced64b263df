"""OCR stage of ingest: an image of a page in, its text out, with Tesseract.

Tesseract (Debian's `tesseract-ocr`, run as a process) was measured against rapidocr-onnxruntime
1.4.4 (PP-OCRv4 inside the wheel) on the same rendered pages: character error rate 0.0% against
5-6% (PP-OCR's recognizer drops spaces between English words) for about 60% of the CPU time
(docs/benchmarks.md, "Documents (issue 29)"). A process also gives the per-page timeout for
free: a page that takes too long is killed, not left running in a thread.

One page at a time, one thread per Tesseract (OMP_THREAD_LIMIT=1): ingest already runs several
documents side by side, and OpenMP's spinning threads cost more than they give on a few cores.

A page with ruled tables (scan_grid finds them in the image) is read in two passes: its prose,
from the page with the tables whitened, and the tables' cells, stacked one a line in a second
image (scan_tables); each table becomes a tables.Table, chunked as a text PDF's are. A page
without one is read whole, as before.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram

from services.gateway.documents.ingest import scan_tables
from services.gateway.documents.ingest.tables import Table, make_table

if TYPE_CHECKING:
    from PIL.Image import Image

log = logging.getLogger(__name__)

OCR_PAGES = Counter(
    "ragrail_ocr_pages_total",
    "Pages (PDF pages without a usable text layer, image frames) read by OCR, by outcome.",
    ["outcome"],  # text, empty, timeout, error
)
OCR_SECONDS = Histogram(
    "ragrail_ocr_page_seconds",
    "Time to OCR one page.",
    buckets=(0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
)

# Page segmentation mode 3 (fully automatic layout analysis, Tesseract's default): keeps
# columns apart, and on the bench's scanned tables keeps each row on one line.
_PSM = "3"
# A stack of table cells (scan_tables) is one block of lines: mode 6 reads it as such,
# where layout analysis would look for columns in it.
_CELLS_PSM = "6"
# Images are scaled so that their longer side is at most this many pixels: a phone photo or a
# 600 dpi scan costs minutes at full size and reads no better than at 300 dpi of A4.
MAX_SIDE_PX = 3600
# A page whose darkest pixel is at least this light (0 black, 255 white) is blank.
_BLANK_LEVEL = 240


class OcrError(Exception):
    """A page could not be read: the message says why (timeout, Tesseract's complaint)."""


@dataclass(frozen=True)
class OcrOptions:
    enabled: bool = True
    languages: str = "eng"
    dpi: int = 300
    timeout_s: float = 60.0


@lru_cache(maxsize=1)
def tesseract_path() -> str | None:
    """The tesseract executable, or None when the tesseract-ocr package is not installed."""
    return shutil.which("tesseract")


# What a user whose gateway lacks Tesseract can do about it (`make install` cannot install a
# system package): install it, or turn OCR off to say that pages without text are meant to
# be left out.
NOT_INSTALLED = (
    "OCR is not available: Tesseract is not installed on the gateway (install it: `apt install "
    "tesseract-ocr`, then restart the gateway; or turn OCR off: RAGRAIL_GATEWAY_OCR=false)"
)


def unavailable_reason(options: OcrOptions) -> str | None:
    """Why OCR cannot run here (a sentence for a warning or an error, naming the fix), or
    None when it can."""
    if not options.enabled:
        return "OCR is off (RAGRAIL_GATEWAY_OCR=false)"
    if tesseract_path() is None:
        return NOT_INSTALLED
    return None


def prepare(image: Image) -> Image:
    """Grayscale, at most MAX_SIDE_PX on the longer side, speckle removed (a 3x3 median:
    Tesseract reads specks as characters; bench/documents.py's noisy scans, with and without
    it, are in docs/benchmarks.md)."""
    from PIL import ImageFilter

    image = image.convert("L")
    longest = max(image.size)
    if longest > MAX_SIDE_PX:
        scale = MAX_SIDE_PX / longest
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size)
    return image.filter(ImageFilter.MedianFilter(3))


@dataclass
class PageText:
    """What OCR read on a page: its text, and its ruled tables (when asked for)."""

    text: str
    tables: list[Table] = field(default_factory=list)


def read_page(
    image: Image, options: OcrOptions, page: int | None = None, tables: bool = False
) -> PageText:
    """The text Tesseract reads in `image` (raw: the caller normalises whitespace) and, with
    `tables`, its ruled tables (`page`: their 1-based page, for citations) read cell by
    cell, their text left out of the page's. One timeout (options.timeout_s) covers the
    page's passes. Raises OcrError on a timeout or a failed run."""
    exe = tesseract_path()
    if exe is None:
        raise OcrError("tesseract is not installed")
    image = prepare(image)
    if image.getextrema()[0] >= _BLANK_LEVEL:
        OCR_PAGES.labels("empty").inc()
        return PageText("")  # a blank page: nothing for Tesseract to find, and it takes a second
    started = time.perf_counter()
    deadline = started + options.timeout_s
    try:
        layout = _layout(image) if tables else None
        if layout is None:
            read = PageText(strip_rules(_tesseract(exe, image, options, _PSM, deadline)))
        else:
            tsv = _tesseract(exe, layout.stack.image, options, _CELLS_PSM, deadline, tsv=True)
            prose = strip_rules(_tesseract(exe, layout.prose, options, _PSM, deadline))
            found = [make_table(rows, caption, page) for caption, rows in layout.tables(tsv)]
            read = PageText(prose, [t for t in found if t is not None])
    finally:
        OCR_SECONDS.observe(time.perf_counter() - started)
    OCR_PAGES.labels("text" if read.text.strip() or read.tables else "empty").inc()
    return read


def _layout(image: Image) -> scan_tables.ScanLayout | None:
    """The page's tables laid out for reading, or None (none found, or the search failed:
    the page is then read whole, as it would be without tables)."""
    try:
        return scan_tables.layout(image)
    except Exception:
        log.warning("table detection failed on a scanned page", exc_info=True)
        return None


def _tesseract(
    exe: str, image: Image, options: OcrOptions, psm: str, deadline: float, tsv: bool = False
) -> str:
    """Tesseract's output for `image` (its text, or its TSV of words with boxes), within
    what is left of the page's time. Raises OcrError on a timeout or a failed run."""
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    command = [exe, "stdin", "stdout", "-l", options.languages, "--psm", psm]
    timeout = deadline - time.perf_counter()
    try:
        if timeout <= 0:
            raise subprocess.TimeoutExpired(command, options.timeout_s)
        proc = subprocess.run(
            [*command, "tsv"] if tsv else command,
            input=buf.getvalue(),
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        OCR_PAGES.labels("timeout").inc()
        raise OcrError(f"OCR took longer than {options.timeout_s:g} s") from None
    if proc.returncode != 0:
        OCR_PAGES.labels("error").inc()
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise OcrError(f"OCR failed ({detail[-1][:200] if detail else proc.returncode})")
    return proc.stdout.decode("utf-8", "replace")


def strip_rules(text: str) -> str:
    """OCR text without what a table's ruling lines are read as: `|` standing alone or at a
    word's edge, and a bracket on a number's edge with no partner ("[3,317", "1,177]"). Left
    in, they sit between a row's label and its values and are noise to search."""
    lines = []
    for line in text.split("\n"):
        words = []
        for word in line.split():
            word = word.strip("|")
            if word.startswith("[") and "]" not in word and word[1:2].isdigit():
                word = word[1:]
            if word.endswith("]") and "[" not in word and word[-2:-1].isdigit():
                word = word[:-1]
            if word:
                words.append(word)
        lines.append(" ".join(words))
    return "\n".join(lines)
