"""PDF pages to text, page by page: the text layer (pypdf), tables (pdf_tables: pdfplumber's
finder on what PDFium reads, on pages that look tabular), and OCR (pypdfium2 renders,
Tesseract reads; a scanned page's ruled tables read cell by cell) for a page without a
usable text layer.

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

from services.gateway.documents.ingest import ocr, pdf_tables
from services.gateway.documents.ingest.normalize import join_pages, normalize_whitespace
from shared.errors import InvalidArgument

if TYPE_CHECKING:
    from services.gateway.documents.ingest.context import ParseContext

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
# A page is searched for tables only when its text has table rows (the search reads the page
# a second time, with PDFium: some 20-40 ms, where pypdf's text takes 5-15 ms). Rows: at
# least this many lines that end in two values or more side by side
# ("Revenue 1,234 1,180", "Net income $ 12 $ (4) 7%", "Other — 12"), or twice as many lines
# that are one value each (pypdf writes a ruled table's cells one per line). Prose with
# figures in it ("rose from $1.2 billion in 2022 to ...") has no such lines.
MIN_NUMERIC_LINES = 3
_NUMBER = re.compile(r"[-(]?[$€£]?\d[\d,.]*%?\)?")
_CURRENCY = frozenset("$€£")  # "$ 12", as some tables set it
_NIL = frozenset("\u2014\u2013-")  # a dash for nil: em, en, hyphen
# A page image covering at least this share of the page is a scan; it is read at its own
# resolution, but not below MIN_SCAN_DPI (Tesseract wants letters some 20 pixels high).
_SCAN_SHARE = 0.5
MIN_SCAN_DPI = 200


def readable(text: str) -> bool:
    """Whether a page's text layer is worth keeping rather than OCR-ing the page."""
    visible = sum(1 for c in text if not c.isspace())
    if visible < MIN_TEXT_CHARS:
        return False
    return len(_READABLE.findall(text)) >= MIN_READABLE_SHARE * len(text)


def looks_tabular(text: str) -> bool:
    """Whether the text layer has table rows: lines ending in numbers side by side, or cells
    on a line each (see MIN_NUMERIC_LINES)."""
    rows = cells = 0
    for line in text.split("\n"):
        numbers, values, words = _trailing_values(line)
        cells += values == words == 1
        rows += values >= 2 and numbers >= 1
        if rows >= MIN_NUMERIC_LINES or cells >= 2 * MIN_NUMERIC_LINES:
            return True
    return False


def _trailing_values(line: str) -> tuple[int, int, int]:
    """(numbers, values: numbers and nil dashes, words) at the end of `line`, and how many
    words it has; currency signs standing alone are not counted. By words, not one regular
    expression: a search over a long line of numbers would backtrack quadratically."""
    words = [w for w in line.split() if w not in _CURRENCY]
    numbers = values = 0
    for word in reversed(words):
        if _NUMBER.fullmatch(word):
            numbers += 1
        elif word not in _NIL:
            break
        values += 1
    return numbers, values, len(words)


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
        self._pdfium: Any = None

    def tables(self, index: int) -> tuple[list[Any], str] | None:
        """The tables of page `index` (0-based) and its text outside them, or None when it
        has none: no ruling lines (PDFium lists its paths in about 1 ms), or none that
        pdfplumber's finder makes a table of (or a failure: the text layer stays as pypdf
        read it)."""
        try:
            with _PDFIUM:
                page = self._document()[index]
                try:
                    left, bottom, right, top = page.get_mediabox()
                    edges = pdf_tables.page_edges(page, top, left)
                    if not edges:
                        return None
                    textpage = page.get_textpage()
                    try:
                        chars = pdf_tables.page_chars(textpage, top, left)
                    finally:
                        textpage.close()
                finally:
                    page.close()
            layout = pdf_tables.PageLayout(right - left, top - bottom, chars, edges)
            return pdf_tables.find_tables(layout, index + 1)
        except Exception:
            log.warning("table detection failed on page %d", index + 1, exc_info=True)
            return None

    def _document(self) -> Any:
        """The PDFium document (call with _PDFIUM held)."""
        if self._pdfium is None:
            import pypdfium2

            self._pdfium = pypdfium2.PdfDocument(self.data)
        return self._pdfium

    def ocr(self, index: int) -> ocr.PageText:
        """The page rendered at the resolution of its scan (at most OCR_DPI) and read, its
        ruled tables as tables when the context asks for tables. Raises ocr.OcrError."""
        try:
            with _PDFIUM:
                page = self._document()[index]
                try:
                    dpi = render_dpi(page, self.ctx.ocr.dpi)
                    image = page.render(scale=dpi / 72).to_pil()
                finally:
                    page.close()
        except Exception as exc:
            raise ocr.OcrError(f"the page could not be rendered ({type(exc).__name__})") from exc
        return ocr.read_page(image, self.ctx.ocr, index + 1, self.ctx.find_tables, dpi)

    def close(self) -> None:
        if self._pdfium is not None:
            with _PDFIUM:
                self._pdfium.close()


def render_dpi(page: Any, most: int) -> float:
    """The resolution to read a page at: that of the scan that fills it, within
    [MIN_SCAN_DPI, most]; `most` for a page without one. A 200 dpi scan rendered at 300 dpi
    reads worse, not better: on bench/documents.py's noisy scans, Tesseract lost whole tables
    at 300 dpi that it read row by row at 200 (and took twice as long)."""
    import pypdfium2.raw as pdfium_c

    width, height = page.get_size()
    scan = None
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE]):
        left, bottom, right, top = obj.get_bounds()
        if (right - left) * (top - bottom) >= _SCAN_SHARE * width * height:
            px_width, px_height = obj.get_px_size()
            dpi = 72 * max(px_width / (right - left), px_height / (top - bottom))
            scan = max(scan or 0.0, dpi)
    if scan is None:
        return float(most)
    return min(float(most), max(scan, MIN_SCAN_DPI))


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
    unread: list[int] = []  # scanned pages left out: no OCR here
    try:
        for index in range(count):
            number = index + 1
            text, how = _read_page(reader, index, pages, ctx, no_ocr, name)
            if how == "ocr":
                ocr_pages.append(number)
            elif how == "skipped":
                skipped.append(number)
            elif how == "unread":
                unread.append(number)
            page_texts.append(text)
            ctx.page_done()
    finally:
        pages.close()
    if unread and no_ocr is not None:
        # One warning for all of them: a scanned document would repeat it on every page.
        ctx.warnings.append(
            f"{_page_list(unread)} of '{name}' {'has' if len(unread) == 1 else 'have'} no text "
            f"layer (scanned?) and {'was' if len(unread) == 1 else 'were'} left out: {no_ocr}"
        )
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
    and OCR off or missing), 'unread' (the same, but the page holds an image: a scan the
    caller warns about), or 'skipped' (unreadable; a warning says so)."""
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
        return "", "unread" if _has_images(reader, index) else "empty"
    try:
        page = pages.ocr(index)
    except ocr.OcrError as exc:
        reason = f"{failure}; OCR: {exc}" if failure else f"OCR: {exc}"
        ctx.warnings.append(f"page {number} of '{name}' skipped: {reason}")
        return text, "skipped"
    read = normalize_whitespace(page.text)
    if failure and not read.strip() and not page.tables:
        ctx.warnings.append(f"page {number} of '{name}' skipped: {failure}")
        return "", "skipped"
    if page.tables or len(read.strip()) >= len(text.strip()):
        ctx.tables.extend(page.tables)
        return read, "ocr"
    return text, "text"


def _page_list(numbers: list[int]) -> str:
    """'page 3', 'pages 2, 5-7'."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs]
    return f"page{'s' if len(numbers) > 1 else ''} {', '.join(parts)}"


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
