"""/v1/documents: ingest files or JSON text, list and delete documents."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Query, Request

from services.gateway.collections.protocol import COLLECTION_NAME
from services.gateway.documents import protocol
from services.gateway.documents.ingest.pipeline import IngestPipeline
from services.gateway.documents.ingest.request import (
    IngestProgress,
    IngestRequest,
    ingest_response,
    parse_documents,
    read_ingest_request,
)
from services.gateway.http.access import (
    all_documents,
    authorize,
    check_access_lists,
    get_principal,
    hidden_document_ids,
    may_see,
)
from services.gateway.http.clients import Services
from services.gateway.http.deps import get_services, get_settings
from services.gateway.http.disconnect import cancel_on_disconnect
from services.gateway.http.errors import ErrorResponse
from services.gateway.http.principals import Action, Principal
from services.gateway.http.validation import INT32_MAX
from services.gateway.settings import GatewaySettings
from shared.errors import NotFound, PermissionDenied
from shared.structs import struct_to_dict

router = APIRouter(prefix="/v1/documents", tags=["documents"])


async def get_pipeline(request: Request) -> IngestPipeline:
    # `async def`: FastAPI runs a plain `def` dependency in its thread pool (http/deps.py).
    return request.app.state.pipeline


CollectionQuery = Query(pattern=COLLECTION_NAME, description="Collection name.")

_MULTIPART_SCHEMA = {
    "type": "object",
    "required": ["collection", "files"],
    "properties": {
        "collection": {"type": "string", "pattern": COLLECTION_NAME},
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
    response_model=protocol.IngestResponse,
    openapi_extra=_INGEST_BODY,
    responses={
        404: {"model": ErrorResponse, "description": "Unknown collection."},
        413: {"model": ErrorResponse, "description": "Request body too large."},
        415: {"model": ErrorResponse, "description": "Unsupported file type."},
        422: {"model": ErrorResponse, "description": "Invalid parameters or document."},
    },
)
async def ingest_documents(
    request: Request,
    services: Services = Depends(get_services),
    settings: GatewaySettings = Depends(get_settings),
    pipeline: IngestPipeline = Depends(get_pipeline),
) -> protocol.IngestResponse:
    """Ingests documents: multipart files (txt, md, html, pdf, docx; png, jpg, tiff by OCR)
    or JSON text.

    Each document is parsed, cut into token chunks with overlap, embedded and stored with its
    metadata. A document's id is its file name (or the `id` given); ingesting the same id
    again replaces that document's chunks.
    """
    started = time.perf_counter()
    ingest = await read_ingest_request(request, settings)
    await authorize_ingest(request, services, ingest)
    hint = "; send large uploads to POST /v1/ingest/jobs"
    ingest.check_size(settings.ingest_max_mb, "RAGRAIL_GATEWAY_INGEST_MAX_MB", hint)
    progress = IngestProgress(settings.ingest_max_chunks, "RAGRAIL_GATEWAY_INGEST_MAX_CHUNKS", hint)

    async def run() -> protocol.IngestResponse:
        docs = await parse_documents(ingest, settings, progress)
        options = ingest.options
        chunker = await pipeline.chunker(options.chunk_size, options.chunk_overlap)
        outcomes, replaced = await pipeline.run(ingest.collection, docs, chunker, progress)
        return ingest_response(ingest.collection, outcomes, replaced, started)

    # A client that leaves stops the embedding (and what is not yet stored is not stored).
    return await cancel_on_disconnect(request, run())


async def authorize_ingest(request: Request, services: Services, ingest: IngestRequest) -> None:
    """Write scope on the collection; access lists naming only the key's own groups; and for a
    key restricted to groups, no document id that replaces a document it cannot see."""
    principal = authorize(request, Action.write, ingest.collection)
    check_access_lists(
        request.scope, principal, ingest.collection, (d.metadata for d in ingest.documents)
    )
    if principal.all_documents:
        return
    hidden = await hidden_document_ids(services, ingest.collection, principal)
    taken = sorted({d.id for d in ingest.documents} & hidden)
    if taken:
        raise PermissionDenied(
            f"document id '{taken[0][:200]}' is taken by a document this key cannot see; "
            "choose another id"
        )


@router.get("", response_model=protocol.DocumentList, responses={404: {"model": ErrorResponse}})
async def list_documents(
    request: Request,
    collection: str = CollectionQuery,
    limit: int = Query(100, ge=1, le=10_000),
    offset: int = Query(0, ge=0, le=INT32_MAX),
    services: Services = Depends(get_services),
    principal: Principal = Depends(get_principal),
) -> protocol.DocumentList:
    """The documents of a collection that the key may see, sorted by id."""
    authorize(request, Action.read, collection)
    if principal.all_documents:
        reply = await services.retriever.list_documents(collection, limit=limit, offset=offset)
        documents, total = list(reply.documents), reply.total
    else:
        # The retriever lists without a filter, so a restricted key's page is cut from every
        # document it may see (one pass over the collection's document list).
        visible = [
            d
            for d in await all_documents(services, collection)
            if may_see(principal, struct_to_dict(d.metadata))
        ]
        documents, total = visible[offset : offset + limit], len(visible)
    return protocol.DocumentList(
        collection=collection,
        total=total,
        documents=[
            protocol.DocumentInfo(
                id=d.id, name=d.name, chunks=d.num_chunks, metadata=struct_to_dict(d.metadata)
            )
            for d in documents
        ],
    )


@router.delete(
    "/{document_id:path}",
    response_model=protocol.DeleteResult,
    responses={404: {"model": ErrorResponse}},
)
async def delete_document(
    request: Request,
    document_id: str,
    collection: str = CollectionQuery,
    services: Services = Depends(get_services),
) -> protocol.DeleteResult:
    principal = authorize(request, Action.write, collection)
    missing = NotFound(f"document '{document_id}' is not in collection '{collection}'")
    if not principal.all_documents and document_id in await hidden_document_ids(
        services, collection, principal
    ):
        raise missing  # a document the key cannot see is one that is not there
    deleted = await services.retriever.delete_documents(collection, [document_id])
    if deleted == 0:
        raise missing
    return protocol.DeleteResult(deleted_chunks=deleted)
