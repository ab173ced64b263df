"""Old path kept for ingest/ alone, which imports it and is being edited in parallel: the
names live in services/gateway/documents/protocol.py. Goes once ingest/ imports them from there."""

from services.gateway.documents.protocol import (
    DocumentsIngest,
    ErrorBody,
    IngestedDocument,
    IngestJob,
    IngestJobState,
    IngestResponse,
    TextDocument,
)

__all__ = [
    "DocumentsIngest",
    "ErrorBody",
    "IngestJob",
    "IngestJobState",
    "IngestResponse",
    "IngestedDocument",
    "TextDocument",
]
