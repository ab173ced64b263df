"""Retriever gRPC servicer: validation, proto <-> record conversion, and hybrid fusion over
whichever vector store the configuration names."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from services.retriever import fusion
from services.retriever.backends import load_backend
from services.retriever.backends.base import ChunkRecord, VectorStore
from services.retriever.backends.validation import MAX_DIMENSION, validate_collection_name
from services.retriever.filters import parse_filter
from services.retriever.settings import RetrieverSettings
from shared.errors import InvalidArgument, NotFound
from shared.proto.ragrail.v1 import common_pb2, retriever_pb2, retriever_pb2_grpc
from shared.server import BlockingRunner, Built, ServiceSpec
from shared.structs import dict_to_struct, struct_to_dict
from shared.version import VERSION

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")

pb = retriever_pb2
DEFAULT_FETCH_K = 10
DEFAULT_RRF_K = 60
DEFAULT_DOCUMENT_PAGE = 100


def chunk_to_proto(chunk: ChunkRecord, include_vector: bool = False) -> pb.Chunk:
    return pb.Chunk(
        id=chunk.id,
        document_id=chunk.document_id,
        document_name=chunk.document_name,
        chunk_index=chunk.chunk_index,
        text=chunk.text,
        vector=list(chunk.vector) if include_vector else [],
        metadata=dict_to_struct(chunk.metadata),
    )


def chunk_from_proto(chunk: pb.Chunk) -> ChunkRecord:
    return ChunkRecord(
        id=chunk.id,
        document_id=chunk.document_id,
        text=chunk.text,
        vector=list(chunk.vector),
        metadata=struct_to_dict(chunk.metadata),
        document_name=chunk.document_name,
        chunk_index=chunk.chunk_index,
    )


class RetrieverServicer(retriever_pb2_grpc.RetrieverServicer):
    def __init__(self, store: VectorStore, settings: RetrieverSettings) -> None:
        self.store = store
        self.settings = settings
        self.run = BlockingRunner(settings.workers, "store")

    # -- collections -------------------------------------------------------------------

    async def CreateCollection(
        self, request: pb.CreateCollectionRequest, context: Any
    ) -> pb.Collection:
        validate_collection_name(request.name)
        if not 0 < request.dimension <= MAX_DIMENSION:
            raise InvalidArgument(
                f"dimension must be between 1 and {MAX_DIMENSION}, got {request.dimension}; "
                "use the embedder's dimension (its Info call reports it)"
            )
        if request.exist_ok:
            try:
                found = await self.run(self.store.get_collection, request.name)
            except NotFound:
                found = None
            if found is not None:
                if found.dimension != request.dimension:
                    raise InvalidArgument(
                        f"collection '{request.name}' exists with dimension {found.dimension}, "
                        f"not {request.dimension}; delete it or use another name"
                    )
                return self._collection(found)
        record = await self.run(
            self.store.create_collection, request.name, request.dimension, request.description
        )
        return self._collection(record)

    async def ListCollections(
        self, request: pb.ListCollectionsRequest, context: Any
    ) -> pb.ListCollectionsResponse:
        records = await self.run(self.store.list_collections)
        return pb.ListCollectionsResponse(collections=[self._collection(r) for r in records])

    async def GetCollection(self, request: pb.GetCollectionRequest, context: Any) -> pb.Collection:
        validate_collection_name(request.name)
        return self._collection(await self.run(self.store.get_collection, request.name))

    async def DeleteCollection(
        self, request: pb.DeleteCollectionRequest, context: Any
    ) -> pb.DeleteCollectionResponse:
        validate_collection_name(request.name)
        await self.run(self.store.delete_collection, request.name)
        return pb.DeleteCollectionResponse()

    async def GetCollectionStats(
        self, request: pb.GetCollectionStatsRequest, context: Any
    ) -> pb.CollectionStats:
        validate_collection_name(request.name)
        record = await self.run(self.store.get_collection, request.name)
        chunks, documents = await self.run(self.store.count, request.name)
        return pb.CollectionStats(
            collection=self._collection(record), num_chunks=chunks, num_documents=documents
        )

    @staticmethod
    def _collection(record: Any) -> pb.Collection:
        return pb.Collection(
            name=record.name,
            dimension=record.dimension,
            description=record.description,
            created_at=record.created_at,
        )

    # -- chunks and documents ----------------------------------------------------------

    def _validate_chunks(self, chunks: list[pb.Chunk]) -> None:
        if not chunks:
            raise InvalidArgument("chunks is empty; send at least one chunk")
        if len(chunks) > self.settings.max_chunks_per_upsert:
            raise InvalidArgument(
                f"{len(chunks)} chunks in one upsert; the limit is "
                f"{self.settings.max_chunks_per_upsert}: send them in several requests"
            )
        seen: set[str] = set()
        for i, chunk in enumerate(chunks):
            where = f"chunks[{i}] (id '{chunk.id}')"
            if not chunk.id or len(chunk.id) > 512:
                raise InvalidArgument(f"chunks[{i}]: id must be 1-512 characters")
            if chunk.id in seen:
                raise InvalidArgument(f"{where}: the id appears twice in this request")
            seen.add(chunk.id)
            if not chunk.document_id or len(chunk.document_id) > 512:
                raise InvalidArgument(f"{where}: document_id must be 1-512 characters")
            # Checked before anything is stored: an id with a control character cannot be
            # named in a Milvus expression, so its document could not be listed or deleted.
            for field, value in (("id", chunk.id), ("document_id", chunk.document_id)):
                if _CONTROL_RE.search(value):
                    raise InvalidArgument(
                        f"{where}: {field} contains a control character; ids must be printable text"
                    )
            if not chunk.text.strip():
                raise InvalidArgument(f"{where}: text is empty")
            if len(chunk.text) > self.settings.max_chunk_chars:
                raise InvalidArgument(
                    f"{where}: text has {len(chunk.text)} characters, more than "
                    f"{self.settings.max_chunk_chars}; chunk documents smaller"
                )
            if not chunk.vector:
                raise InvalidArgument(f"{where}: vector is empty; embed the text first")

    async def UpsertChunks(
        self, request: pb.UpsertChunksRequest, context: Any
    ) -> pb.UpsertChunksResponse:
        validate_collection_name(request.collection)
        self._validate_chunks(list(request.chunks))
        records = [chunk_from_proto(c) for c in request.chunks]
        upserted = await self.run(self.store.upsert, request.collection, records)
        deleted = 0
        if request.replace_documents:
            document_ids = sorted({r.document_id for r in records})
            deleted = await self.run(
                self.store.delete_stale_chunks,
                request.collection,
                document_ids,
                [r.id for r in records],
            )
        return pb.UpsertChunksResponse(upserted=upserted, deleted=deleted)

    async def ListDocuments(
        self, request: pb.ListDocumentsRequest, context: Any
    ) -> pb.ListDocumentsResponse:
        validate_collection_name(request.collection)
        if request.limit < 0 or request.offset < 0:
            raise InvalidArgument("limit and offset must not be negative")
        limit = min(request.limit or DEFAULT_DOCUMENT_PAGE, 10_000)
        documents, total = await self.run(
            self.store.list_documents, request.collection, limit, request.offset
        )
        return pb.ListDocumentsResponse(
            documents=[
                pb.Document(
                    id=d.id,
                    name=d.name,
                    num_chunks=d.num_chunks,
                    metadata=dict_to_struct(d.metadata),
                )
                for d in documents
            ],
            total=total,
        )

    async def DeleteDocuments(
        self, request: pb.DeleteDocumentsRequest, context: Any
    ) -> pb.DeleteDocumentsResponse:
        validate_collection_name(request.collection)
        if not request.document_ids:
            raise InvalidArgument("document_ids is empty; name the documents to delete")
        deleted = await self.run(
            self.store.delete_documents, request.collection, list(request.document_ids)
        )
        return pb.DeleteDocumentsResponse(deleted=deleted)

    # -- search ------------------------------------------------------------------------

    async def Search(self, request: pb.SearchRequest, context: Any) -> pb.SearchResponse:
        validate_collection_name(request.collection)
        mode = request.mode or pb.SEARCH_MODE_HYBRID
        fetch_k = request.fetch_k or DEFAULT_FETCH_K
        if not 0 < fetch_k <= self.settings.max_top_k:
            raise InvalidArgument(f"fetch_k must be between 1 and {self.settings.max_top_k}")
        wants_dense = mode in (pb.SEARCH_MODE_DENSE, pb.SEARCH_MODE_HYBRID)
        wants_sparse = mode in (pb.SEARCH_MODE_SPARSE, pb.SEARCH_MODE_HYBRID)
        mode_name = pb.SearchMode.Name(mode).removeprefix("SEARCH_MODE_").lower()
        if wants_dense and not request.query_vector:
            raise InvalidArgument(f"{mode_name} search needs query_vector (embed the query first)")
        if wants_sparse and not request.query_text.strip():
            raise InvalidArgument(f"{mode_name} search needs query_text")
        if request.candidate_k < 0 or request.rrf_k < 0:
            raise InvalidArgument("candidate_k and rrf_k must not be negative")
        if request.dense_weight < 0 or request.sparse_weight < 0:
            raise InvalidArgument("dense_weight and sparse_weight must not be negative")
        flt = parse_filter(struct_to_dict(request.filter)) if request.HasField("filter") else None
        vector = list(request.query_vector)
        include = request.include_vectors

        if mode != pb.SEARCH_MODE_HYBRID:
            if wants_dense:
                results = await self.run(
                    self.store.dense_search, request.collection, vector, fetch_k, flt, include
                )
            else:
                results = await self.run(
                    self.store.sparse_search,
                    request.collection,
                    request.query_text,
                    fetch_k,
                    flt,
                    include,
                )
            hits = fusion.single(results, dense=wants_dense)
        else:
            depth = request.candidate_k or max(fetch_k * 4, 100)
            depth = min(max(depth, fetch_k), self.settings.max_candidate_k)
            dense, sparse = await asyncio.gather(
                self.run(self.store.dense_search, request.collection, vector, depth, flt, include),
                self.run(
                    self.store.sparse_search,
                    request.collection,
                    request.query_text,
                    depth,
                    flt,
                    include,
                ),
            )
            if request.fusion == pb.FUSION_METHOD_WEIGHTED:
                dw, sw = request.dense_weight, request.sparse_weight
                if dw == 0 and sw == 0:
                    dw = sw = 0.5
                hits = fusion.weighted(dense, sparse, fetch_k, dw, sw)
            else:
                hits = fusion.rrf(dense, sparse, fetch_k, request.rrf_k or DEFAULT_RRF_K)
        return pb.SearchResponse(
            mode=mode,
            hits=[
                pb.SearchHit(
                    chunk=chunk_to_proto(h.chunk, include),
                    score=h.score,
                    dense_score=h.dense_score,
                    sparse_score=h.sparse_score,
                    dense_rank=h.dense_rank,
                    sparse_rank=h.sparse_rank,
                )
                for h in hits
            ],
        )

    async def Info(self, request: common_pb2.InfoRequest, context: Any) -> pb.RetrieverInfo:
        return pb.RetrieverInfo(
            service=common_pb2.ServiceInfo(
                service="retriever",
                version=VERSION,
                backend=self.store.name,
                details=self.store.describe(),
            ),
            modes=[pb.SEARCH_MODE_DENSE, pb.SEARCH_MODE_SPARSE, pb.SEARCH_MODE_HYBRID],
        )

    async def close(self) -> None:
        self.run.shutdown()
        self.store.close()


def open_store(settings: RetrieverSettings) -> VectorStore:
    return load_backend(settings)


async def build(settings: RetrieverSettings) -> Built:
    store = await asyncio.to_thread(open_store, settings)
    await asyncio.to_thread(store.open_all)
    servicer = RetrieverServicer(store, settings)
    return Built(
        specs=[ServiceSpec.of(pb, servicer, retriever_pb2_grpc.add_RetrieverServicer_to_server)],
        close=servicer.close,
        ready_message={"backend": store.name, **store.describe()},
    )
