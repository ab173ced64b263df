"""An ingest request read into documents, for POST /v1/documents and POST /v1/ingest/jobs
alike: multipart files or JSON text, every field validated (document ids before anything is
stored), and the per-request limits on bytes and chunks.

Reading happens while the client waits (the body has to arrive); parsing, chunking and
embedding may happen later, in a job.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from services.gateway.documents import protocol as schemas
from services.gateway.documents.ingest.ocr import OcrOptions
from services.gateway.documents.ingest.parsers import (
    ParseContext,
    UnsupportedMediaType,
    parse_document,
)
from services.gateway.documents.ingest.pipeline import DocumentOutcome, PendingDocument
from services.gateway.http.errors import PayloadTooLarge
from services.gateway.http.validation import check_document_id
from services.gateway.settings import GatewaySettings
from shared.errors import InvalidArgument
from shared.formats import CONTENT_HASH


@dataclass
class RawDocument:
    """A document as received: bytes not yet parsed, with its checked id."""

    id: str
    name: str
    data: bytes
    content_type: str | None
    metadata: dict[str, Any]


@dataclass
class IngestRequest:
    options: schemas.DocumentsIngest  # collection, metadata, chunk sizes (documents unused)
    documents: list[RawDocument]

    @property
    def collection(self) -> str:
        return self.options.collection

    @property
    def size(self) -> int:
        return sum(len(d.data) for d in self.documents)

    def check_size(self, max_mb: float, setting: str, hint: str = "") -> None:
        """413 when the documents hold more than `max_mb` megabytes."""
        if self.size > max_mb * 1024 * 1024:
            raise PayloadTooLarge(
                f"the documents hold {self.size / 1024 / 1024:.1f} MB, more than the {max_mb:g} "
                f"MB one request may ingest ({setting}){hint}"
            )


def validation_message(exc: ValidationError) -> str:
    parts = [
        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
        for e in exc.errors()[:10]
    ]
    return "invalid request: " + "; ".join(parts)


def _int_field(form: Any, name: str) -> int | None:
    raw = form.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{name} must be an integer, got '{str(raw)[:40]}'") from None


async def _from_multipart(request: Request, settings: GatewaySettings) -> IngestRequest:
    form = await request.form(max_files=settings.max_files_per_request)
    uploads = [f for f in form.getlist("files") + form.getlist("file") if isinstance(f, UploadFile)]
    if not uploads:
        raise InvalidArgument("no files in the form; send them in a 'files' field")
    raw_metadata = form.get("metadata") or "{}"
    try:
        metadata = json.loads(raw_metadata if isinstance(raw_metadata, str) else "{}")
    except (json.JSONDecodeError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise InvalidArgument(f"metadata is not valid JSON: {reason}") from None
    try:
        # Validate the form's fields with the JSON model, a placeholder standing in for files.
        options = schemas.DocumentsIngest(
            collection=str(form.get("collection") or ""),
            documents=[schemas.TextDocument(name="-", text="-")],
            metadata=metadata,
            chunk_size=_int_field(form, "chunk_size"),
            chunk_overlap=_int_field(form, "chunk_overlap"),
        )
    except ValidationError as exc:
        raise InvalidArgument(validation_message(exc)) from None
    documents = []
    for i, upload in enumerate(uploads):
        name = upload.filename or "upload"
        doc_id = check_document_id(name, f"files[{i}] (its file name)")
        data = await upload.read()
        documents.append(RawDocument(doc_id, name, data, upload.content_type, dict(metadata)))
    return IngestRequest(options, documents)


async def _from_json(request: Request) -> IngestRequest:
    try:
        options = schemas.DocumentsIngest.model_validate_json(await request.body())
    except ValidationError as exc:
        raise InvalidArgument(validation_message(exc)) from None
    documents = []
    for i, d in enumerate(options.documents):
        where = f"documents[{i}].id" if d.id else f"documents[{i}].name"
        doc_id = check_document_id(d.id or d.name, where)
        try:
            data = d.text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument(f"documents[{i}].text is not valid Unicode text") from None
        metadata = {**options.metadata, **d.metadata}
        documents.append(RawDocument(doc_id, d.name, data, d.content_type, metadata))
    return IngestRequest(options, documents)


async def read_ingest_request(request: Request, settings: GatewaySettings) -> IngestRequest:
    """The request's documents and options, validated; 415 for another content type."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        return await _from_multipart(request, settings)
    if content_type.startswith("application/json"):
        return await _from_json(request)
    raise UnsupportedMediaType(
        f"send documents as multipart/form-data files or as application/json, "
        f"not '{content_type[:100] or 'no content type'}'"
    )


def ocr_options(settings: GatewaySettings) -> OcrOptions:
    return OcrOptions(
        enabled=settings.ocr,
        languages=settings.ocr_languages,
        dpi=settings.ocr_dpi,
        timeout_s=settings.ocr_timeout_s,
        tessdata=settings.ocr_tessdata,
    )


async def parse_documents(
    ingest: IngestRequest, settings: GatewaySettings, progress: IngestProgress | None = None
) -> list[PendingDocument]:
    """Text, tables and metadata of every document (parsers run in threads: PDFs take a
    while); `progress` counts their pages as they are read."""
    options = ocr_options(settings)

    def parse(d: RawDocument) -> Any:
        ctx = ParseContext(ocr=options, find_tables=settings.tables, pages=progress)
        return parse_document(d.data, d.name, d.content_type, ctx)

    parsed = await asyncio.gather(*(asyncio.to_thread(parse, d) for d in ingest.documents))
    return [
        PendingDocument(d.id, d.name, p, {**d.metadata, CONTENT_HASH: content_hash(d.data)})
        for d, p in zip(ingest.documents, parsed, strict=True)
    ]


# Computed here rather than trusted from the caller (shared.formats.CONTENT_HASH).
def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class IngestProgress:
    """An ingest's counts as it goes, and its chunk limit: the pipeline reports when the
    documents are chunked (before any embedding, so an over-limit request costs only its
    tokenization) and each time a group of whole documents is stored."""

    max_chunks: int
    setting: str  # the environment variable that sets max_chunks, for the 413's message
    hint: str = ""  # what to do instead, appended to that message
    documents_total: int = 0
    chunks_total: int = 0
    documents_done: int = 0
    chunks_done: int = 0
    pages_total: int = 0
    pages_done: int = 0
    stored_ids: list[str] = field(default_factory=list)
    # Pages are counted from the parser threads, several documents at once.
    _pages_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def pages_found(self, count: int) -> None:
        with self._pages_lock:
            self.pages_total += count

    def page_done(self) -> None:
        with self._pages_lock:
            self.pages_done += 1

    def chunked(self, documents: Sequence[PendingDocument]) -> None:
        self.documents_total = len(documents)
        self.chunks_total = sum(len(d.chunks) for d in documents)
        if self.chunks_total > self.max_chunks:
            raise PayloadTooLarge(
                f"the documents make {self.chunks_total} chunks, more than the "
                f"{self.max_chunks} one request may ingest ({self.setting}){self.hint}"
            )

    def stored(self, documents: Sequence[PendingDocument]) -> None:
        self.documents_done += len(documents)
        self.chunks_done += sum(len(d.chunks) for d in documents)
        self.stored_ids.extend(d.id for d in documents)


def ingest_response(
    collection: str, outcomes: list[DocumentOutcome], replaced: int, started: float
) -> schemas.IngestResponse:
    """The answer to an ingest that `started` at that time.perf_counter()."""
    return schemas.IngestResponse(
        collection=collection,
        documents=[schemas.IngestedDocument(**vars(o)) for o in outcomes],
        total_chunks=sum(o.chunks for o in outcomes),
        replaced_chunks=replaced,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 2),
    )
