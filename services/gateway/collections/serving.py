"""Collections, to and from the retriever's: created at the running embedder's dimension,
listed as far as a key may read them, with their counts when one is asked for."""

from __future__ import annotations

from services.gateway.collections import protocol
from services.gateway.http.access import readable
from services.gateway.http.clients import Services
from services.gateway.http.principals import Principal
from shared.proto.ragrail.v1 import retriever_pb2


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


class CollectionsServing:
    def __init__(self, services: Services) -> None:
        self.services = services

    async def create(self, body: protocol.CollectionCreate) -> protocol.Collection:
        # Sized for the vectors the embedder makes now: a collection of another dimension
        # could not take its documents.
        embedder = await self.services.embedder.info()
        created = await self.services.retriever.create_collection(
            body.name, embedder.dimension, body.description
        )
        return _collection(created)

    async def readable(self, principal: Principal) -> list[protocol.Collection]:
        collections = await self.services.retriever.list_collections()
        names = set(readable(principal, [c.name for c in collections]))
        return [_collection(c) for c in collections if c.name in names]

    async def get(self, name: str) -> protocol.Collection:
        stats = await self.services.retriever.collection_stats(name)
        return _collection(stats.collection, stats)

    async def delete(self, name: str) -> None:
        await self.services.retriever.delete_collection(name)
