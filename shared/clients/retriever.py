"""Typed client of the retriever service (collections, chunks, documents, Search)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from shared.clients.base import TypedClient
from shared.proto.ragrail.v1 import retriever_pb2, retriever_pb2_grpc
from shared.structs import dict_to_struct

Mode = Literal["dense", "sparse", "hybrid"]
Fusion = Literal["rrf", "weighted"]
_MODES = {
    "dense": retriever_pb2.SEARCH_MODE_DENSE,
    "sparse": retriever_pb2.SEARCH_MODE_SPARSE,
    "hybrid": retriever_pb2.SEARCH_MODE_HYBRID,
}
_FUSIONS = {
    "rrf": retriever_pb2.FUSION_METHOD_RRF,
    "weighted": retriever_pb2.FUSION_METHOD_WEIGHTED,
}


class RetrieverClient(TypedClient[retriever_pb2_grpc.RetrieverStub]):
    service = "retriever"
    stub_cls = retriever_pb2_grpc.RetrieverStub

    # -- collections ---------------------------------------------------------------------

    async def create_collection(
        self, name: str, dimension: int, description: str = ""
    ) -> retriever_pb2.Collection:
        return await self.rpc.call(
            "CreateCollection",
            retriever_pb2.CreateCollectionRequest(
                name=name, dimension=dimension, description=description
            ),
        )

    async def list_collections(self) -> list[retriever_pb2.Collection]:
        reply = await self.rpc.call("ListCollections", retriever_pb2.ListCollectionsRequest())
        return list(reply.collections)

    async def get_collection(self, name: str) -> retriever_pb2.Collection:
        return await self.rpc.call("GetCollection", retriever_pb2.GetCollectionRequest(name=name))

    async def collection_stats(self, name: str) -> retriever_pb2.CollectionStats:
        return await self.rpc.call(
            "GetCollectionStats", retriever_pb2.GetCollectionStatsRequest(name=name)
        )

    async def delete_collection(self, name: str) -> None:
        await self.rpc.call("DeleteCollection", retriever_pb2.DeleteCollectionRequest(name=name))

    # -- chunks and documents --------------------------------------------------------------

    async def upsert_chunks(
        self,
        collection: str,
        chunks: Sequence[retriever_pb2.Chunk],
        *,
        replace_documents: bool = True,
        timeout_s: float | None = None,
    ) -> retriever_pb2.UpsertChunksResponse:
        return await self.rpc.call(
            "UpsertChunks",
            retriever_pb2.UpsertChunksRequest(
                collection=collection, chunks=chunks, replace_documents=replace_documents
            ),
            timeout_s=timeout_s,
        )

    async def list_documents(
        self, collection: str, *, limit: int, offset: int = 0
    ) -> retriever_pb2.ListDocumentsResponse:
        return await self.rpc.call(
            "ListDocuments",
            retriever_pb2.ListDocumentsRequest(collection=collection, limit=limit, offset=offset),
        )

    async def delete_documents(self, collection: str, document_ids: Sequence[str]) -> int:
        """Chunks deleted (0: none of the documents was there)."""
        reply = await self.rpc.call(
            "DeleteDocuments",
            retriever_pb2.DeleteDocumentsRequest(collection=collection, document_ids=document_ids),
        )
        return int(reply.deleted)

    # -- search ------------------------------------------------------------------------------

    async def search(
        self,
        collection: str,
        *,
        query_text: str,
        query_vector: Sequence[float],
        mode: Mode,
        fetch_k: int,
        fusion: Fusion = "rrf",
        filter: dict[str, Any] | None = None,
        rrf_k: int = 0,
        dense_weight: float = 0.0,
        sparse_weight: float = 0.0,
        timeout_s: float | None = None,
    ) -> Sequence[retriever_pb2.SearchHit]:
        """The best `fetch_k` chunks, best first. rrf_k and the weights at 0 leave them to the
        retriever's defaults (k 60; weights 0.5 each)."""
        request = retriever_pb2.SearchRequest(
            collection=collection,
            query_text=query_text,
            query_vector=query_vector,
            mode=_MODES[mode],
            fetch_k=fetch_k,
            fusion=_FUSIONS[fusion],
            rrf_k=rrf_k,
            dense_weight=dense_weight,
            sparse_weight=sparse_weight,
        )
        if filter:
            request.filter.CopyFrom(dict_to_struct(filter))
        reply: retriever_pb2.SearchResponse = await self.rpc.call(
            "Search", request, timeout_s=timeout_s
        )
        return reply.hits
