"""PNG, JPEG and TIFF uploads read with OCR (ruled tables cell by cell, as tables); each frame
of a multi-page TIFF is a page."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from services.gateway.documents.ingest import ocr
from services.gateway.documents.ingest.normalize import join_pages, normalize_whitespace
from shared.errors import InvalidArgument

if TYPE_CHECKING:
    from services.gateway.documents.ingest.context import ParseContext

# Pillow's own guard against decompression bombs is a warning up to twice this; an image
# over it is refused here before it is decoded.
MAX_PIXELS = 100_000_000
# A TIFF with more frames than this is refused: each is OCR'd, a minute each at worst.
MAX_FRAMES = 1000


def parse_image(
    data: bytes, name: str, ctx: ParseContext
) -> tuple[str, str | None, dict[str, Any]]:
    from PIL import Image, ImageSequence, UnidentifiedImageError

    reason = ocr.unavailable_reason(ctx.ocr)
    if reason is not None:
        raise InvalidArgument(
            f"'{name}' is an image, and images are read with OCR, but {reason}. Upload the "
            "document's text, or a PDF with a text layer."
        )
    try:
        image = Image.open(io.BytesIO(data))
        image.verify()  # a truncated or corrupt file fails here, before any decoding work
        image = Image.open(io.BytesIO(data))
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise InvalidArgument(
            f"'{name}' could not be read as an image; the file looks damaged. Save it again "
            "as PNG, JPEG or TIFF and upload it again."
        ) from exc
    frames = getattr(image, "n_frames", 1)
    if image.width * image.height > MAX_PIXELS or frames > MAX_FRAMES:
        raise InvalidArgument(
            f"'{name}' is too large to read ({image.width}x{image.height} pixels, {frames} "
            f"page(s); at most {MAX_PIXELS:,} pixels and {MAX_FRAMES} pages). Scale it down "
            "or split it."
        )
    ctx.pages_found(frames)
    page_texts: list[str] = []
    ocr_pages: list[int] = []
    for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
        try:
            dpi = ocr.declared_dpi(frame)
            read = ocr.read_page(frame.copy(), ctx.ocr, number, ctx.find_tables, dpi)
            text = normalize_whitespace(read.text)
            ctx.tables.extend(read.tables)
            ocr_pages.append(number)
        except (ocr.OcrError, OSError) as exc:
            ctx.warnings.append(f"page {number} of '{name}' skipped: {exc}")
            text = ""
        page_texts.append(text)
        ctx.page_done()
    joined, page_starts = join_pages(page_texts)
    if not joined.strip() and not ctx.tables:
        raise InvalidArgument(
            f"'{name}' contains no text that OCR could read. Check the image shows text "
            "(scanned at 200 dpi or more) and upload it again."
        )
    metadata: dict[str, Any] = {
        "pages": frames,
        "pages_with_text": sum(1 for t in page_texts if t),
        "page_starts": page_starts,
        "ocr_pages": ocr_pages,
    }
    return joined, None, metadata
