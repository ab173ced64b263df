"""/v1/documents: ingest files or JSON text, list and delete documents."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Query, Request

from services.gateway import schemas
from services.gateway.clients import Services
from services.gateway.deps import get_pipeline, get_services, get_settings
from services.gateway.disconnect import cancel_on_disconnect
from services.gateway.ingest.pipeline import IngestPipeline
from services.gateway.ingest.request import (
    IngestProgress,
    ingest_response,
    parse_documents,
    read_ingest_request,
)
from services.gateway.settings import GatewaySettings
from services.gateway.validation import INT32_MAX
from shared.errors import NotFound
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
    """Ingests documents: multipart files (txt, md, html, pdf, docx; png, jpg, tiff by OCR)
    or JSON text.

    Each document is parsed, cut into token chunks with overlap, embedded and stored with its
    metadata. A document's id is its file name (or the `id` given); ingesting the same id
    again replaces that document's chunks.
    """
    started = time.perf_counter()
    ingest = await read_ingest_request(request, settings)
    hint = "; send large uploads to POST /v1/ingest/jobs"
    ingest.check_size(settings.ingest_max_mb, "RAGRAIL_GATEWAY_INGEST_MAX_MB", hint)
    progress = IngestProgress(settings.ingest_max_chunks, "RAGRAIL_GATEWAY_INGEST_MAX_CHUNKS", hint)

    async def run() -> schemas.IngestResponse:
        docs = await parse_documents(ingest, settings, progress)
        options = ingest.options
        chunker = await pipeline.chunker(options.chunk_size, options.chunk_overlap)
        outcomes, replaced = await pipeline.run(ingest.collection, docs, chunker, progress)
        return ingest_response(ingest.collection, outcomes, replaced, started)

    # A client that leaves stops the embedding (and what is not yet stored is not stored).
    return await cancel_on_disconnect(request, run())


@router.get(
    "", response_model=schemas.DocumentList, responses={404: {"model": schemas.ErrorResponse}}
)
async def list_documents(
    collection: str = CollectionQuery,
    limit: int = Query(100, ge=1, le=10_000),
    offset: int = Query(0, ge=0, le=INT32_MAX),
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
