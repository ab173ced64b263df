"""/v1/documents: ingest files or JSON text, list and delete documents."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Query, Request

from services.gateway.collections.protocol import COLLECTION_NAME
from services.gateway.documents import protocol
from services.gateway.documents.ingest.request import IngestRequest, read_ingest_request
from services.gateway.documents.serving import DocumentsServing
from services.gateway.http.access import authorize, check_access_lists, get_principal
from services.gateway.http.deps import get_settings
from services.gateway.http.disconnect import cancel_on_disconnect
from services.gateway.http.errors import error_responses
from services.gateway.http.principals import Action, Principal
from services.gateway.http.validation import INT32_MAX
from services.gateway.settings import GatewaySettings
from shared.structs import struct_to_dict

router = APIRouter(prefix="/v1/documents", tags=["documents"])


async def get_documents(request: Request) -> DocumentsServing:
    # `async def`: FastAPI runs a plain `def` dependency in its thread pool (http/deps.py).
    return request.app.state.documents


CollectionQuery = Query(pattern=COLLECTION_NAME, description="Collection name.")
# What reading an ingest request may answer, on both ingest endpoints (read_ingest_request).
INGEST_ERRORS = {404: "Unknown collection.", 413: "Request body too large."}


@router.post(
    "",
    response_model=protocol.IngestResponse,
    openapi_extra=protocol.INGEST_BODY,
    responses=error_responses(
        {**INGEST_ERRORS, 415: "Unsupported file type.", 422: "Invalid parameters or document."}
    ),
)
async def ingest_documents(
    request: Request,
    settings: GatewaySettings = Depends(get_settings),
    documents: DocumentsServing = Depends(get_documents),
) -> protocol.IngestResponse:
    """Ingests documents: multipart files (txt, md, html, pdf, docx; png, jpg, tiff by OCR)
    or JSON text.

    Each document is parsed, cut into token chunks with overlap, embedded and stored with its
    metadata. A document's id is its file name (or the `id` given); ingesting the same id
    again replaces that document's chunks.
    """
    started = time.perf_counter()
    ingest = await read_ingest_request(request, settings)
    await authorize_ingest(request, documents, ingest)
    progress = documents.check_size(ingest)
    # A client that leaves stops the embedding (and what is not yet stored is not stored).
    return await cancel_on_disconnect(request, documents.ingest(ingest, progress, started))


async def authorize_ingest(
    request: Request, documents: DocumentsServing, ingest: IngestRequest
) -> None:
    """Write scope on the collection; access lists naming only the key's own groups; and for a
    key restricted to groups, no document id that replaces a document it cannot see."""
    principal = authorize(request, Action.write, ingest.collection)
    check_access_lists(
        request.scope, principal, ingest.collection, (d.metadata for d in ingest.documents)
    )
    await documents.check_replacements(principal, ingest)


@router.get("", response_model=protocol.DocumentList, responses=error_responses([404]))
async def list_documents(
    request: Request,
    collection: str = CollectionQuery,
    limit: int = Query(100, ge=1, le=10_000),
    offset: int = Query(0, ge=0, le=INT32_MAX),
    documents: DocumentsServing = Depends(get_documents),
    principal: Principal = Depends(get_principal),
) -> protocol.DocumentList:
    """The documents of a collection that the key may see, sorted by id."""
    authorize(request, Action.read, collection)
    page, total = await documents.page(collection, principal, limit, offset)
    return protocol.DocumentList(
        collection=collection,
        total=total,
        documents=[
            protocol.DocumentInfo(
                id=d.id, name=d.name, chunks=d.num_chunks, metadata=struct_to_dict(d.metadata)
            )
            for d in page
        ],
    )


@router.delete(
    "/{document_id:path}",
    response_model=protocol.DeleteResult,
    responses=error_responses([404]),
)
async def delete_document(
    request: Request,
    document_id: str,
    collection: str = CollectionQuery,
    documents: DocumentsServing = Depends(get_documents),
) -> protocol.DeleteResult:
    principal = authorize(request, Action.write, collection)
    deleted = await documents.delete(collection, document_id, principal)
    return protocol.DeleteResult(deleted_chunks=deleted)
