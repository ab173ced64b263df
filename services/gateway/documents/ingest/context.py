"""What a parser may use besides an upload's bytes (OCR and table settings, a page counter)
and what it finds besides the text (tables, warnings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from services.gateway.documents.ingest.ocr import OcrOptions
from services.gateway.documents.ingest.tables import Table


class PageCounter(Protocol):
    """Hears how many pages a paged document has and when each is read (job progress)."""

    def pages_found(self, count: int) -> None: ...

    def page_done(self) -> None: ...


@dataclass
class ParseContext:
    """What a parser may use besides the bytes (OCR and table settings, a page counter) and
    what it finds besides the text (tables, warnings)."""

    ocr: OcrOptions = field(default_factory=OcrOptions)
    find_tables: bool = True
    pages: PageCounter | None = None
    tables: list[Table] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def pages_found(self, count: int) -> None:
        if self.pages is not None:
            self.pages.pages_found(count)

    def page_done(self) -> None:
        if self.pages is not None:
            self.pages.page_done()
