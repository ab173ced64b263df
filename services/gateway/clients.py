"""Old path kept for ingest/ alone, which imports it and is being edited in parallel: the
names live in services/gateway/http/clients.py. Goes once ingest/ imports them from there."""

from services.gateway.http.clients import Services

__all__ = ["Services"]
