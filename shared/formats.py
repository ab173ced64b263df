"""The document formats ragrail ingests: file extension -> canonical content type.

Standard library only, so the HTTP client (`ragrail/client.py`, which picks the files to
upload) and the gateway's parsers read one table without the client importing the gateway
or grpc."""

from __future__ import annotations

TEXT_PLAIN = "text/plain"
TEXT_MARKDOWN = "text/markdown"
TEXT_HTML = "text/html"
TEXT_RST = "text/x-rst"
TEXT_CSV = "text/csv"
APPLICATION_JSON = "application/json"
APPLICATION_PDF = "application/pdf"
APPLICATION_DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

SUPPORTED: dict[str, str] = {
    ".txt": TEXT_PLAIN,
    ".text": TEXT_PLAIN,
    ".md": TEXT_MARKDOWN,
    ".markdown": TEXT_MARKDOWN,
    ".rst": TEXT_RST,
    ".csv": TEXT_CSV,
    ".json": APPLICATION_JSON,
    ".html": TEXT_HTML,
    ".htm": TEXT_HTML,
    ".pdf": APPLICATION_PDF,
    ".docx": APPLICATION_DOCX,
}
"""File extension (lower case, with the dot) -> canonical content type."""
