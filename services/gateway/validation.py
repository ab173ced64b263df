"""Old path kept for ingest/ alone, which imports it and is being edited in parallel: the
names live in services/gateway/http/validation.py. Goes once ingest/ imports them from there."""

from services.gateway.http.validation import check_document_id

__all__ = ["check_document_id"]
