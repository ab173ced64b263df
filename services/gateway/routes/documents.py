"""/v1/documents: ingest files or JSON text, list and delete documents."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from services.gateway import schemas
from services.gateway.clients import Services
from services.gateway.deps import get_pipeline, get_services, get_settings
from services.gateway.ingest.parsers import UnsupportedMediaType, parse_document
from services.gateway.ingest.pipeline import IngestPipeline, PendingDocument, document_id_for
from services.gateway.settings import GatewaySettings
from shared.errors import InvalidArgument, NotFound
from shared.structs import struct_to_dict

router = APIRouter(prefix="/v1/documents", tags=["documents"])
CollectionQuery = Query(pattern=schemas.COLLECTION_NAME, description="Collection name.")

_MULTIPART_SCHEMA = {
    "type": "object",
    "required": ["collection", "files"],
    "properties": {
        "collection": {"type": "string", "pattern": schemas.COLLECTION_NAME},
        "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
        "metadata": {"type": "string", "description": "JSON object merged into every document."},
        "chunk_size": {"type": "integer"},
        "chunk_overlap": {"type": "integer"},
    },
}
_INGEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {"schema": _MULTIPART_SCHEMA},
            "application/json": {"schema": {"$ref": "#/components/schemas/DocumentsIngest"}},
        },
    }
}


def _int_field(form: Any, name: str) -> int | None:
    raw = form.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{name} must be an integer, got '{raw}'") from None


async def _from_multipart(
    request: Request, settings: GatewaySettings
) -> tuple[schemas.DocumentsIngest, list[tuple[str, bytes, str | None]]]:
    form = await request.form(max_files=settings.max_files_per_request)
    uploads = [f for f in form.getlist("files") + form.getlist("file") if isinstance(f, UploadFile)]
    if not uploads:
        raise InvalidArgument("no files in the form; send them in a 'files' field")
    try:
        metadata = json.loads(form.get("metadata") or "{}")
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"metadata is not valid JSON: {exc.msg}") from None
    try:
        # Validate the form's fields with the JSON model, a placeholder standing in for files.
        meta = schemas.DocumentsIngest(
            collection=str(form.get("collection") or ""),
            documents=[schemas.TextDocument(name="-", text="-")],
            metadata=metadata,
            chunk_size=_int_field(form, "chunk_size"),
            chunk_overlap=_int_field(form, "chunk_overlap"),
        )
    except ValidationError as exc:
        raise InvalidArgument(_validation_message(exc)) from None
    files = [(u.filename or "upload", await u.read(), u.content_type) for u in uploads]
    return meta, files


def _validation_message(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10]]
    return "invalid request: " + "; ".join(parts)


@router.post(
    "",
    response_model=schemas.IngestResponse,
    openapi_extra=_INGEST_BODY,
    responses={
        404: {"model": schemas.ErrorResponse, "description": "Unknown collection."},
        413: {"model": schemas.ErrorResponse, "description": "Request body too large."},
        415: {"model": schemas.ErrorResponse, "description": "Unsupported file type."},
        422: {"model": schemas.ErrorResponse, "description": "Invalid parameters or document."},
    },
)
async def ingest_documents(
    request: Request,
    services: Services = Depends(get_services),
    settings: GatewaySettings = Depends(get_settings),
    pipeline: IngestPipeline = Depends(get_pipeline),
) -> schemas.IngestResponse:
    """Ingests documents: multipart files (txt, md, html, pdf, docx) or JSON text.

    Each document is parsed, cut into token chunks with overlap, embedded and stored with its
    metadata. A document's id is its file name (or the `id` given); ingesting the same id
    again replaces that document's chunks.
    """
    started = time.perf_counter()
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        body, files = await _from_multipart(request, settings)
        parsed = await asyncio.gather(
            *(asyncio.to_thread(parse_document, data, name, ctype) for name, data, ctype in files)
        )
        docs = [
            PendingDocument(document_id_for(name, None), name, p, dict(body.metadata))
            for (name, _, _), p in zip(files, parsed, strict=True)
        ]
    elif content_type.startswith("application/json"):
        try:
            body = schemas.DocumentsIngest.model_validate_json(await request.body())
        except ValidationError as exc:
            raise InvalidArgument(_validation_message(exc)) from None
        docs = []
        for d in body.documents:
            p = parse_document(d.text.encode("utf-8"), d.name, d.content_type)
            docs.append(
                PendingDocument(
                    document_id_for(d.name, d.id), d.name, p, {**body.metadata, **d.metadata}
                )
            )
    else:
        raise UnsupportedMediaType(
            f"send documents as multipart/form-data files or as application/json, "
            f"not '{content_type or 'no content type'}'"
        )
    chunker = await pipeline.chunker(body.chunk_size, body.chunk_overlap)
    outcomes, replaced = await pipeline.run(body.collection, docs, chunker)
    return schemas.IngestResponse(
        collection=body.collection,
        documents=[schemas.IngestedDocument(**vars(o)) for o in outcomes],
        total_chunks=sum(o.chunks for o in outcomes),
        replaced_chunks=replaced,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 2),
    )


@router.get(
    "", response_model=schemas.DocumentList, responses={404: {"model": schemas.ErrorResponse}}
)
async def list_documents(
    collection: str = CollectionQuery,
    limit: int = Query(100, ge=1, le=10_000),
    offset: int = Query(0, ge=0),
    services: Services = Depends(get_services),
) -> schemas.DocumentList:
    reply = await services.retriever.list_documents(collection, limit=limit, offset=offset)
    return schemas.DocumentList(
        collection=collection,
        total=reply.total,
        documents=[
            schemas.DocumentInfo(
                id=d.id, name=d.name, chunks=d.num_chunks, metadata=struct_to_dict(d.metadata)
            )
            for d in reply.documents
        ],
    )


@router.delete(
    "/{document_id:path}",
    response_model=schemas.DeleteResult,
    responses={404: {"model": schemas.ErrorResponse}},
)
async def delete_document(
    document_id: str,
    collection: str = CollectionQuery,
    services: Services = Depends(get_services),
) -> schemas.DeleteResult:
    deleted = await services.retriever.delete_documents(collection, [document_id])
    if deleted == 0:
        raise NotFound(f"document '{document_id}' is not in collection '{collection}'")
    return schemas.DeleteResult(deleted_chunks=deleted)
