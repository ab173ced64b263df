"""/v1/collections: create, list, inspect and delete collections."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request

from services.gateway.collections import protocol
from services.gateway.collections.serving import CollectionsServing
from services.gateway.http.access import authorize, get_principal
from services.gateway.http.errors import error_responses
from services.gateway.http.principals import Action, Principal

router = APIRouter(prefix="/v1/collections", tags=["collections"])
NamePath = Path(pattern=protocol.COLLECTION_NAME, description="Collection name.")


async def get_collections(request: Request) -> CollectionsServing:
    # `async def`: FastAPI runs a plain `def` dependency in its thread pool (http/deps.py).
    return request.app.state.collections


@router.post(
    "",
    status_code=201,
    response_model=protocol.Collection,
    responses=error_responses([403, 409]),
)
async def create_collection(
    body: protocol.CollectionCreate,
    request: Request,
    collections: CollectionsServing = Depends(get_collections),
) -> protocol.Collection:
    """Creates a collection sized for the running embedder's vectors (admin scope)."""
    authorize(request, Action.admin, body.name, creating=True)
    return await collections.create(body)


@router.get("", response_model=protocol.CollectionList)
async def list_collections(
    collections: CollectionsServing = Depends(get_collections),
    principal: Principal = Depends(get_principal),
) -> protocol.CollectionList:
    """The collections the key may read."""
    return protocol.CollectionList(collections=await collections.readable(principal))


@router.get("/{name}", response_model=protocol.Collection, responses=error_responses([404]))
async def get_collection(
    request: Request,
    name: str = NamePath,
    collections: CollectionsServing = Depends(get_collections),
) -> protocol.Collection:
    authorize(request, Action.read, name)
    return await collections.get(name)


@router.delete(
    "/{name}",
    status_code=204,
    responses=error_responses([403, 404]),
)
async def delete_collection(
    request: Request,
    name: str = NamePath,
    collections: CollectionsServing = Depends(get_collections),
) -> None:
    """Deletes a collection and its documents (admin scope)."""
    authorize(request, Action.admin, name)
    await collections.delete(name)
