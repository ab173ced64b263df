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
# Images are read with OCR (the gateway's ocr setting); a TIFF's frames are its pages.
IMAGE_PNG = "image/png"
IMAGE_JPEG = "image/jpeg"
IMAGE_TIFF = "image/tiff"
IMAGES = frozenset({IMAGE_PNG, IMAGE_JPEG, IMAGE_TIFF})

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
    ".png": IMAGE_PNG,
    ".jpg": IMAGE_JPEG,
    ".jpeg": IMAGE_JPEG,
    ".tif": IMAGE_TIFF,
    ".tiff": IMAGE_TIFF,
}
"""File extension (lower case, with the dot) -> canonical content type."""

# The metadata key under which the gateway records the SHA-256 of the bytes each document was
# parsed from; `ragrail sync` compares it with the file on disk.
CONTENT_HASH = "content_sha256"

# The metadata key holding a document's access list: the groups whose keys may see it (the
# gateway's mandatory filter tests it; no key, or null, means everyone may). The Milvus
# backend mirrors it into scalar columns, one per group, so it holds at most
# MAX_ACCESS_GROUPS groups on every backend.
ACCESS_GROUPS = "access_groups"
MAX_ACCESS_GROUPS = 8
