"""/v1/collections: create, list, inspect and delete collections."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request

from services.gateway.collections import protocol
from services.gateway.http.access import authorize, get_principal, readable
from services.gateway.http.clients import Services
from services.gateway.http.deps import get_services
from services.gateway.http.errors import ErrorResponse
from services.gateway.http.principals import Action, Principal
from shared.proto.ragrail.v1 import retriever_pb2

router = APIRouter(prefix="/v1/collections", tags=["collections"])
NamePath = Path(pattern=protocol.COLLECTION_NAME, description="Collection name.")


def _collection(
    c: retriever_pb2.Collection, stats: retriever_pb2.CollectionStats | None = None
) -> protocol.Collection:
    return protocol.Collection(
        name=c.name,
        dimension=c.dimension,
        description=c.description,
        created_at=c.created_at,
        num_chunks=stats.num_chunks if stats else None,
        num_documents=stats.num_documents if stats else None,
    )


@router.post(
    "",
    status_code=201,
    response_model=protocol.Collection,
    responses={403: {"model": ErrorResponse}, 409: {"model": ErrorResponse}},
)
async def create_collection(
    body: protocol.CollectionCreate, request: Request, services: Services = Depends(get_services)
) -> protocol.Collection:
    """Creates a collection sized for the running embedder's vectors (admin scope)."""
    authorize(request, Action.admin, body.name, creating=True)
    embedder = await services.embedder.info()
    created = await services.retriever.create_collection(
        body.name, embedder.dimension, body.description
    )
    return _collection(created)


@router.get("", response_model=protocol.CollectionList)
async def list_collections(
    services: Services = Depends(get_services), principal: Principal = Depends(get_principal)
) -> protocol.CollectionList:
    """The collections the key may read."""
    collections = await services.retriever.list_collections()
    names = set(readable(principal, [c.name for c in collections]))
    return protocol.CollectionList(
        collections=[_collection(c) for c in collections if c.name in names]
    )


@router.get(
    "/{name}", response_model=protocol.Collection, responses={404: {"model": ErrorResponse}}
)
async def get_collection(
    request: Request, name: str = NamePath, services: Services = Depends(get_services)
) -> protocol.Collection:
    authorize(request, Action.read, name)
    stats = await services.retriever.collection_stats(name)
    return _collection(stats.collection, stats)


@router.delete(
    "/{name}",
    status_code=204,
    responses={403: {"model": ErrorResponse}, 404: {"model": ErrorResponse}},
)
async def delete_collection(
    request: Request, name: str = NamePath, services: Services = Depends(get_services)
) -> None:
    """Deletes a collection and its documents (admin scope)."""
    authorize(request, Action.admin, name)
    await services.retriever.delete_collection(name)
