"""OCR stage of ingest: an image of a page in, its text out, with Tesseract.

Tesseract (Debian's `tesseract-ocr`, run as a process) was measured against rapidocr-onnxruntime
1.4.4 (PP-OCRv4 inside the wheel) on the same rendered pages: character error rate 0.0% against
5-6% (PP-OCR's recognizer drops spaces between English words) for about 60% of the CPU time
(docs/benchmarks.md, "Documents (issue 29)"). A process also gives the per-page timeout for
free: a page that takes too long is killed, not left running in a thread.

One page at a time, one thread per Tesseract (OMP_THREAD_LIMIT=1): ingest already runs several
documents side by side, and OpenMP's spinning threads cost more than they give on a few cores.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram

if TYPE_CHECKING:
    from PIL.Image import Image

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


def ocr_image(image: Image, options: OcrOptions) -> str:
    """The text Tesseract reads in `image` (raw: the caller normalises whitespace).
    Raises OcrError on a timeout or a failed run."""
    exe = tesseract_path()
    if exe is None:
        raise OcrError("tesseract is not installed")
    image = prepare(image)
    if image.getextrema()[0] >= _BLANK_LEVEL:
        OCR_PAGES.labels("empty").inc()
        return ""  # a blank page: nothing for Tesseract to find, and it takes a second
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [exe, "stdin", "stdout", "-l", options.languages, "--psm", _PSM],
            input=buf.getvalue(),
            capture_output=True,
            timeout=options.timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        OCR_PAGES.labels("timeout").inc()
        raise OcrError(f"OCR took longer than {options.timeout_s:g} s") from None
    finally:
        OCR_SECONDS.observe(time.perf_counter() - started)
    if proc.returncode != 0:
        OCR_PAGES.labels("error").inc()
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise OcrError(f"OCR failed ({detail[-1][:200] if detail else proc.returncode})")
    text = strip_rules(proc.stdout.decode("utf-8", "replace"))
    OCR_PAGES.labels("text" if text.strip() else "empty").inc()
    return text


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
