"""Scope checks the routes make, and the mandatory document filter of a principal.

- A collection the principal cannot read answers exactly as a collection that does not
  exist (the retriever's own 404 message), whatever the action: its name is not disclosed.
- A readable collection it may not write or administer is a 403.
- Retrieval is filtered inside the retriever's query by the principal's groups: documents
  whose `access_groups` share one of them, or that carry no access list. The filter is ANDed
  (`$and`) with the caller's own, which can only narrow it (the filter language has no $or).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import Request
from starlette.types import Scope

from services.gateway.http import audit
from services.gateway.http.clients import Services
from services.gateway.http.principals import OPEN, Action, Principal
from shared.errors import InvalidArgument, NotFound, PermissionDenied
from shared.formats import ACCESS_GROUPS, MAX_ACCESS_GROUPS
from shared.proto.ragrail.v1 import retriever_pb2
from shared.structs import struct_to_dict

ACCESS_FIELD = ACCESS_GROUPS


def principal_of(request: Request) -> Principal:
    return request.scope.get("state", {}).get("principal", OPEN)


async def get_principal(request: Request) -> Principal:
    """A dependency: the request's principal (OPEN when the gateway has no keys)."""
    return principal_of(request)


def not_found(collection: str) -> NotFound:
    # Word for word the retriever's (backends/base.py collection_not_found): a refusal must not
    # read differently from a collection that does not exist.
    return NotFound(
        f"collection '{collection}' does not exist; create it with POST /v1/collections"
    )


def authorize(
    request: Request, action: Action, collection: str, *, creating: bool = False
) -> Principal:
    """The principal, if it may take `action` on `collection`; else 404 (not readable) or 403
    (readable, or being created: a name that does not exist yet has nothing to hide). A
    permitted write is marked for the audit line the auth middleware writes with its
    outcome."""
    principal = principal_of(request)
    scope = request.scope
    if principal.can(action, collection):
        if action >= Action.write:
            scope.setdefault("state", {})["audit_write"] = (action.name, collection)
        return principal
    readable = principal.can(Action.read, collection)
    audit.denied(scope, principal.name, f"no_{action.name}", collection, action.name)
    if not readable and not creating:
        raise not_found(collection)
    raise PermissionDenied(
        f"key '{principal.name}' may not {_verb(action)} collection '{collection}'"
    )


def _verb(action: Action) -> str:
    return {Action.read: "read", Action.write: "write to", Action.admin: "administer"}[action]


def readable(principal: Principal, names: Iterable[str]) -> list[str]:
    return [n for n in names if principal.can(Action.read, n)]


def document_filter(principal: Principal, user: dict[str, Any] | None) -> dict[str, Any] | None:
    """The filter the retriever gets: the caller's, ANDed with the principal's access filter."""
    if principal.all_documents:
        return user
    mandatory = {ACCESS_FIELD: {"$unset_or_any": list(principal.groups or ())}}
    if not principal.groups:
        # No group: only documents with no access list. `$unset_or_any` needs a value, and
        # no group name can be the empty string.
        mandatory = {ACCESS_FIELD: {"$unset_or_any": [""]}}
    return {"$and": [user, mandatory]} if user else mandatory


def may_see(principal: Principal, metadata: dict[str, Any]) -> bool:
    """The same rule as `document_filter`, for a document's listed metadata."""
    if principal.all_documents:
        return True
    groups = metadata.get(ACCESS_FIELD)
    if groups is None:
        return True
    return isinstance(groups, list) and bool(set(principal.groups or ()) & set(groups))


def check_access_lists(
    scope: Scope, principal: Principal, collection: str, documents: Iterable[dict[str, Any]]
) -> None:
    """An ingest's access lists: a list of group names each, and only groups the principal
    belongs to (else a team could hand its documents to, or plant them in, another's view)."""
    for metadata in documents:
        groups = metadata.get(ACCESS_FIELD)
        if groups is None:
            continue
        if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
            raise InvalidArgument(
                f'metadata.{ACCESS_FIELD} must be a list of group names, e.g. ["team-a"]'
            )
        if len(groups) > MAX_ACCESS_GROUPS:
            raise InvalidArgument(
                f"metadata.{ACCESS_FIELD} lists {len(groups)} groups; a document may name at "
                f"most {MAX_ACCESS_GROUPS} (make a group that covers several teams)"
            )
        if principal.all_documents:
            continue
        foreign = sorted(set(groups) - set(principal.groups or ()))
        if foreign:
            audit.denied(scope, principal.name, "foreign_group", collection, "write")
            raise PermissionDenied(
                f"key '{principal.name}' may not give documents to groups it is not in: "
                + ", ".join(foreign[:5])
            )


_PAGE = 10_000


async def all_documents(services: Services, collection: str) -> list[retriever_pb2.Document]:
    """Every document of a collection, page by page."""
    documents: list[retriever_pb2.Document] = []
    while True:
        reply = await services.retriever.list_documents(
            collection, limit=_PAGE, offset=len(documents)
        )
        documents.extend(reply.documents)
        if len(reply.documents) < _PAGE or len(documents) >= reply.total:
            return documents


async def hidden_document_ids(
    services: Services, collection: str, principal: Principal
) -> set[str]:
    """Ids of the documents of `collection` that `principal` may not see."""
    return {
        d.id
        for d in await all_documents(services, collection)
        if not may_see(principal, struct_to_dict(d.metadata))
    }
