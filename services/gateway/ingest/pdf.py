"""PDF pages to text, page by page: the text layer (pypdf), tables (pdfplumber, on pages that
look tabular), and OCR (pypdfium2 renders, Tesseract reads) for a page without a usable text
layer.

One page is held at a time (its text, at most one rendered image), so a long PDF costs the
memory of its bytes and its text, not of its pages. A page that cannot be read is skipped
with a warning naming it; the rest still ingests. Only a PDF with no text at all is refused.
"""

from __future__ import annotations

import io
import logging
import re
import threading
from typing import TYPE_CHECKING, Any

from services.gateway.ingest import ocr
from services.gateway.ingest.parsers import join_pages, normalize_whitespace
from services.gateway.ingest.tables import make_table
from shared.errors import InvalidArgument

if TYPE_CHECKING:
    from services.gateway.ingest.parsers import ParseContext

log = logging.getLogger(__name__)

# PDFium is not thread-safe, and documents are parsed in threads side by side.
_PDFIUM = threading.Lock()

# A text layer with fewer visible characters than this is treated as missing (a scan with a
# page number or a stamp on it) and the page is read with OCR.
MIN_TEXT_CHARS = 20
# A text layer in which fewer than this share of characters are letters, digits, spaces or
# common punctuation is garbage (a font without a Unicode map) and the page is read with OCR.
MIN_READABLE_SHARE = 0.7
_READABLE = re.compile(r"[\w\s.,;:!?'\"()\[\]%$€£¥&/+*=<>@#-]")
# Pages are looked at for tables only when at least this many lines carry two numbers or
# more: pdfplumber costs several times pypdf's text extraction, and prose pages never need it.
MIN_NUMERIC_LINES = 3
_NUMBER = re.compile(r"(?<![\w.])[-(]?[$€£]?\d[\d,.]*%?\)?(?![\w])")
# Above a table, this many points are searched for its caption.
_CAPTION_BAND_PT = 36


def readable(text: str) -> bool:
    """Whether a page's text layer is worth keeping rather than OCR-ing the page."""
    visible = sum(1 for c in text if not c.isspace())
    if visible < MIN_TEXT_CHARS:
        return False
    return len(_READABLE.findall(text)) >= MIN_READABLE_SHARE * len(text)


def looks_tabular(text: str) -> bool:
    """Rows of numbers on one line each, or cells on a line each (pypdf writes a ruled
    table's cells one per line)."""
    rows = cells = 0
    for line in text.split("\n"):
        numbers = _NUMBER.findall(line)
        if len(numbers) >= 2:
            rows += 1
        elif len(numbers) == 1 and len(line) <= len(numbers[0]) + 2:
            cells += 1
        if rows >= MIN_NUMERIC_LINES or cells >= 2 * MIN_NUMERIC_LINES:
            return True
    return False


def _open(data: bytes, name: str) -> Any:
    from pypdf import PdfReader

    if b"%PDF-" not in data[:1024]:
        raise InvalidArgument(
            f"'{name}' is not a PDF file (no PDF header). Check the file and upload it again."
        )
    try:
        reader = PdfReader(io.BytesIO(data))
        encrypted = reader.is_encrypted
    except Exception as exc:  # pypdf raises a zoo of types on damaged files
        raise InvalidArgument(
            f"'{name}' could not be read as a PDF; the file looks damaged. Re-export or "
            "re-save it as PDF and upload it again."
        ) from exc
    if encrypted:
        try:
            unlocked = bool(reader.decrypt(""))
        except Exception:  # missing crypto backend, unknown algorithm, ...
            unlocked = False
        if not unlocked:
            raise InvalidArgument(
                f"'{name}' is a password-protected (encrypted) PDF. Remove the password, "
                "save it again and upload the unprotected copy."
            )
    return reader


class _PageReader:
    """The per-page work that needs other libraries than pypdf, opened on first use."""

    def __init__(self, data: bytes, ctx: ParseContext) -> None:
        self.data = data
        self.ctx = ctx
        self._plumber: Any = None
        self._pdfium: Any = None

    def tables(self, index: int) -> tuple[list[Any], str] | None:
        """The tables of page `index` (0-based) and its text outside them, or None when
        pdfplumber finds none (or fails: the text layer stays as pypdf read it)."""
        try:
            if self._plumber is None:
                import pdfplumber

                self._plumber = pdfplumber.open(io.BytesIO(self.data))
            page = self._plumber.pages[index]
            try:
                return _plumber_tables(page, index + 1)
            finally:
                page.close()  # drops the page's parsed objects: memory stays per page
        except Exception:
            log.warning("table detection failed on page %d", index + 1, exc_info=True)
            return None

    def ocr(self, index: int) -> str:
        """The page rendered at the OCR resolution and read. Raises ocr.OcrError."""
        try:
            with _PDFIUM:
                if self._pdfium is None:
                    import pypdfium2

                    self._pdfium = pypdfium2.PdfDocument(self.data)
                page = self._pdfium[index]
                try:
                    image = page.render(scale=self.ctx.ocr.dpi / 72).to_pil()
                finally:
                    page.close()
        except Exception as exc:
            raise ocr.OcrError(f"the page could not be rendered ({type(exc).__name__})") from exc
        return ocr.ocr_image(image, self.ctx.ocr)

    def close(self) -> None:
        if self._plumber is not None:
            self._plumber.close()
        if self._pdfium is not None:
            with _PDFIUM:
                self._pdfium.close()


def _plumber_tables(page: Any, number: int) -> tuple[list[Any], str] | None:
    found = page.find_tables()
    if not found:
        # Tables ruled only between rows (no vertical lines): columns from the words' edges.
        found = page.find_tables({"vertical_strategy": "text", "horizontal_strategy": "lines"})
    tables = []
    boxes = []
    for candidate in found:
        top = candidate.bbox[1]
        band = page.crop((0, max(0, top - _CAPTION_BAND_PT), page.width, top))
        above = (band.extract_text() or "").strip().split("\n")
        table = make_table(candidate.extract(), above[-1] if above else "", number)
        if table is not None:
            tables.append(table)
            boxes.append(candidate.bbox)
    if not tables:
        return None
    rest = page
    for box in boxes:
        rest = rest.outside_bbox(box)
    return tables, rest.extract_text() or ""


def parse_pdf(data: bytes, name: str, ctx: ParseContext) -> tuple[str, str | None, dict[str, Any]]:
    reader = _open(data, name)
    try:
        count = len(reader.pages)
    except Exception as exc:
        raise InvalidArgument(
            f"'{name}' could not be read as a PDF; its page tree is damaged. Re-export or "
            "re-save it as PDF and upload it again."
        ) from exc
    ctx.pages_found(count)
    no_ocr = ocr.unavailable_reason(ctx.ocr)
    pages = _PageReader(data, ctx)
    page_texts: list[str] = []
    ocr_pages: list[int] = []
    skipped: list[int] = []
    try:
        for index in range(count):
            number = index + 1
            text, how = _read_page(reader, index, pages, ctx, no_ocr, name)
            if how == "ocr":
                ocr_pages.append(number)
            elif how == "skipped":
                skipped.append(number)
            page_texts.append(text)
            ctx.page_done()
    finally:
        pages.close()
    joined, page_starts = join_pages(page_texts)
    if not joined.strip() and not ctx.tables:
        raise InvalidArgument(_no_text_message(name, count, skipped, no_ocr))
    metadata: dict[str, Any] = {
        "pages": count,
        "pages_with_text": sum(1 for t in page_texts if t),
        "page_starts": page_starts,
    }
    if ocr_pages:
        metadata["ocr_pages"] = ocr_pages
    if skipped:
        metadata["skipped_pages"] = skipped
    title: str | None = None
    try:
        info = reader.metadata
        if info is not None:
            title = " ".join(str(info.title or "").split()) or None
            author = " ".join(str(info.author or "").split())
            if author:
                metadata["author"] = author
    except Exception:  # a broken info dictionary is not worth failing the upload for
        log.debug("unreadable PDF info dictionary in %s", name, exc_info=True)
    return joined, title, metadata


def _read_page(
    reader: Any, index: int, pages: _PageReader, ctx: ParseContext, no_ocr: str | None, name: str
) -> tuple[str, str]:
    """One page's text and how it was read: 'text' (its text layer), 'ocr', 'empty' (no text
    and OCR off), or 'skipped' (unreadable; a warning says so)."""
    number = index + 1
    failure = ""
    try:
        text = normalize_whitespace(reader.pages[index].extract_text() or "")
    except Exception as exc:
        log.warning("text extraction failed on page %d of %s", number, name, exc_info=True)
        failure = f"its text layer could not be read ({type(exc).__name__})"
        text = ""
    if readable(text):
        if ctx.find_tables and looks_tabular(text):
            found = pages.tables(index)
            if found is not None:
                tables, rest = found
                ctx.tables.extend(tables)
                text = normalize_whitespace(rest)
        return text, "text"
    if no_ocr is not None:
        if failure:
            ctx.warnings.append(f"page {number} of '{name}' skipped: {failure}")
            return "", "skipped"
        if text.strip():
            return text, "text"  # a short text layer is better than nothing
        if _has_images(reader, index):
            ctx.warnings.append(f"page {number} of '{name}' has no text layer and {no_ocr}")
        return "", "empty"
    try:
        read = normalize_whitespace(pages.ocr(index))
    except ocr.OcrError as exc:
        reason = f"{failure}; OCR: {exc}" if failure else f"OCR: {exc}"
        ctx.warnings.append(f"page {number} of '{name}' skipped: {reason}")
        return text, "skipped"
    if failure and not read.strip():
        ctx.warnings.append(f"page {number} of '{name}' skipped: {failure}")
        return "", "skipped"
    if len(read.strip()) >= len(text.strip()):
        return read, "ocr"
    return text, "text"


def _has_images(reader: Any, index: int) -> bool:
    try:
        resources = reader.pages[index].get("/Resources") or {}
        xobjects = resources.get_object().get("/XObject") or {}
        return any(x.get_object().get("/Subtype") == "/Image" for x in xobjects.values())
    except Exception:
        return False


def _no_text_message(name: str, count: int, skipped: list[int], no_ocr: str | None) -> str:
    if count and len(skipped) == count:
        detail = f"none of its {count} page(s) could be read"
    elif no_ocr is not None:
        detail = f"it has no text layer (scanned pages?) and {no_ocr}"
    else:
        detail = "neither its text layer nor OCR found any text"
    return (
        f"'{name}' contains no text: {detail}. Upload a PDF with a text layer, or the "
        "document's text in another format."
    )
