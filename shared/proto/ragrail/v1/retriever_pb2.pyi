from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper

from shared.proto.ragrail.v1 import common_pb2 as _common_pb2

DESCRIPTOR: _descriptor.FileDescriptor

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_DENSE: _ClassVar[SearchMode]
    SEARCH_MODE_SPARSE: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]

class FusionMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FUSION_METHOD_UNSPECIFIED: _ClassVar[FusionMethod]
    FUSION_METHOD_RRF: _ClassVar[FusionMethod]
    FUSION_METHOD_WEIGHTED: _ClassVar[FusionMethod]

SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_DENSE: SearchMode
SEARCH_MODE_SPARSE: SearchMode
SEARCH_MODE_HYBRID: SearchMode
FUSION_METHOD_UNSPECIFIED: FusionMethod
FUSION_METHOD_RRF: FusionMethod
FUSION_METHOD_WEIGHTED: FusionMethod

class Collection(_message.Message):
    __slots__ = ("created_at", "description", "dimension", "name")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    name: str
    dimension: int
    description: str
    created_at: float
    def __init__(
        self,
        name: str | None = ...,
        dimension: int | None = ...,
        description: str | None = ...,
        created_at: float | None = ...,
    ) -> None: ...

class CreateCollectionRequest(_message.Message):
    __slots__ = ("description", "dimension", "exist_ok", "name")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EXIST_OK_FIELD_NUMBER: _ClassVar[int]
    name: str
    dimension: int
    description: str
    exist_ok: bool
    def __init__(
        self,
        name: str | None = ...,
        dimension: int | None = ...,
        description: str | None = ...,
        exist_ok: bool | None = ...,
    ) -> None: ...

class ListCollectionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListCollectionsResponse(_message.Message):
    __slots__ = ("collections",)
    COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    collections: _containers.RepeatedCompositeFieldContainer[Collection]
    def __init__(self, collections: _Iterable[Collection | _Mapping] | None = ...) -> None: ...

class DeleteCollectionRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: str | None = ...) -> None: ...

class DeleteCollectionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetCollectionStatsRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: str | None = ...) -> None: ...

class CollectionStats(_message.Message):
    __slots__ = ("collection", "num_chunks", "num_documents")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    NUM_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    NUM_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    collection: Collection
    num_chunks: int
    num_documents: int
    def __init__(
        self,
        collection: Collection | _Mapping | None = ...,
        num_chunks: int | None = ...,
        num_documents: int | None = ...,
    ) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("chunk_index", "document_id", "document_name", "id", "metadata", "text", "vector")
    ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CHUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    id: str
    document_id: str
    text: str
    vector: _containers.RepeatedScalarFieldContainer[float]
    metadata: _struct_pb2.Struct
    document_name: str
    chunk_index: int
    def __init__(
        self,
        id: str | None = ...,
        document_id: str | None = ...,
        text: str | None = ...,
        vector: _Iterable[float] | None = ...,
        metadata: _struct_pb2.Struct | _Mapping | None = ...,
        document_name: str | None = ...,
        chunk_index: int | None = ...,
    ) -> None: ...

class UpsertChunksRequest(_message.Message):
    __slots__ = ("chunks", "collection", "replace_documents")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    chunks: _containers.RepeatedCompositeFieldContainer[Chunk]
    replace_documents: bool
    def __init__(
        self,
        collection: str | None = ...,
        chunks: _Iterable[Chunk | _Mapping] | None = ...,
        replace_documents: bool | None = ...,
    ) -> None: ...

class UpsertChunksResponse(_message.Message):
    __slots__ = ("deleted", "upserted")
    UPSERTED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    upserted: int
    deleted: int
    def __init__(self, upserted: int | None = ..., deleted: int | None = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("id", "metadata", "name", "num_chunks")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    num_chunks: int
    metadata: _struct_pb2.Struct
    def __init__(
        self,
        id: str | None = ...,
        name: str | None = ...,
        num_chunks: int | None = ...,
        metadata: _struct_pb2.Struct | _Mapping | None = ...,
    ) -> None: ...

class ListDocumentsRequest(_message.Message):
    __slots__ = ("collection", "limit", "offset")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    collection: str
    limit: int
    offset: int
    def __init__(
        self, collection: str | None = ..., limit: int | None = ..., offset: int | None = ...
    ) -> None: ...

class ListDocumentsResponse(_message.Message):
    __slots__ = ("documents", "total")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    total: int
    def __init__(
        self, documents: _Iterable[Document | _Mapping] | None = ..., total: int | None = ...
    ) -> None: ...

class DeleteDocumentsRequest(_message.Message):
    __slots__ = ("collection", "document_ids")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(
        self, collection: str | None = ..., document_ids: _Iterable[str] | None = ...
    ) -> None: ...

class DeleteDocumentsResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: int | None = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = (
        "candidate_k",
        "collection",
        "dense_weight",
        "filter",
        "fusion",
        "include_vectors",
        "mode",
        "query_text",
        "query_vector",
        "rrf_k",
        "sparse_weight",
        "top_k",
    )
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    QUERY_TEXT_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    RRF_K_FIELD_NUMBER: _ClassVar[int]
    DENSE_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    SPARSE_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_K_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_VECTORS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    query_text: str
    query_vector: _containers.RepeatedScalarFieldContainer[float]
    mode: SearchMode
    top_k: int
    filter: _struct_pb2.Struct
    fusion: FusionMethod
    rrf_k: int
    dense_weight: float
    sparse_weight: float
    candidate_k: int
    include_vectors: bool
    def __init__(
        self,
        collection: str | None = ...,
        query_text: str | None = ...,
        query_vector: _Iterable[float] | None = ...,
        mode: SearchMode | str | None = ...,
        top_k: int | None = ...,
        filter: _struct_pb2.Struct | _Mapping | None = ...,
        fusion: FusionMethod | str | None = ...,
        rrf_k: int | None = ...,
        dense_weight: float | None = ...,
        sparse_weight: float | None = ...,
        candidate_k: int | None = ...,
        include_vectors: bool | None = ...,
    ) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("chunk", "dense_rank", "dense_score", "score", "sparse_rank", "sparse_score")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    DENSE_SCORE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_SCORE_FIELD_NUMBER: _ClassVar[int]
    DENSE_RANK_FIELD_NUMBER: _ClassVar[int]
    SPARSE_RANK_FIELD_NUMBER: _ClassVar[int]
    chunk: Chunk
    score: float
    dense_score: float
    sparse_score: float
    dense_rank: int
    sparse_rank: int
    def __init__(
        self,
        chunk: Chunk | _Mapping | None = ...,
        score: float | None = ...,
        dense_score: float | None = ...,
        sparse_score: float | None = ...,
        dense_rank: int | None = ...,
        sparse_rank: int | None = ...,
    ) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "mode")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    mode: SearchMode
    def __init__(
        self,
        hits: _Iterable[SearchHit | _Mapping] | None = ...,
        mode: SearchMode | str | None = ...,
    ) -> None: ...

class RetrieverInfo(_message.Message):
    __slots__ = ("modes", "service")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    MODES_FIELD_NUMBER: _ClassVar[int]
    service: _common_pb2.ServiceInfo
    modes: _containers.RepeatedScalarFieldContainer[SearchMode]
    def __init__(
        self,
        service: _common_pb2.ServiceInfo | _Mapping | None = ...,
        modes: _Iterable[SearchMode | str] | None = ...,
    ) -> None: ...
