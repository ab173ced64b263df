"""Old path kept for ingest/ alone, which imports it and is being edited in parallel: the
names live in services/gateway/http/errors.py. Goes once ingest/ imports them from there."""

from services.gateway.http.errors import PayloadTooLarge

__all__ = ["PayloadTooLarge"]
