from google.protobuf import struct_pb2 as _struct_pb2
from shared.proto.ragrail.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

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
    __slots__ = ("name", "dimension", "description", "created_at")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    name: str
    dimension: int
    description: str
    created_at: float
    def __init__(self, name: _Optional[str] = ..., dimension: _Optional[int] = ..., description: _Optional[str] = ..., created_at: _Optional[float] = ...) -> None: ...

class CreateCollectionRequest(_message.Message):
    __slots__ = ("name", "dimension", "description", "exist_ok")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EXIST_OK_FIELD_NUMBER: _ClassVar[int]
    name: str
    dimension: int
    description: str
    exist_ok: bool
    def __init__(self, name: _Optional[str] = ..., dimension: _Optional[int] = ..., description: _Optional[str] = ..., exist_ok: _Optional[bool] = ...) -> None: ...

class ListCollectionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListCollectionsResponse(_message.Message):
    __slots__ = ("collections",)
    COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    collections: _containers.RepeatedCompositeFieldContainer[Collection]
    def __init__(self, collections: _Optional[_Iterable[_Union[Collection, _Mapping]]] = ...) -> None: ...

class GetCollectionRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteCollectionRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteCollectionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetCollectionStatsRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class CollectionStats(_message.Message):
    __slots__ = ("collection", "num_chunks", "num_documents")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    NUM_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    NUM_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    collection: Collection
    num_chunks: int
    num_documents: int
    def __init__(self, collection: _Optional[_Union[Collection, _Mapping]] = ..., num_chunks: _Optional[int] = ..., num_documents: _Optional[int] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("id", "document_id", "text", "vector", "metadata", "document_name", "chunk_index")
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
    def __init__(self, id: _Optional[str] = ..., document_id: _Optional[str] = ..., text: _Optional[str] = ..., vector: _Optional[_Iterable[float]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., document_name: _Optional[str] = ..., chunk_index: _Optional[int] = ...) -> None: ...

class UpsertChunksRequest(_message.Message):
    __slots__ = ("collection", "chunks", "replace_documents")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    chunks: _containers.RepeatedCompositeFieldContainer[Chunk]
    replace_documents: bool
    def __init__(self, collection: _Optional[str] = ..., chunks: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ..., replace_documents: _Optional[bool] = ...) -> None: ...

class UpsertChunksResponse(_message.Message):
    __slots__ = ("upserted", "deleted")
    UPSERTED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    upserted: int
    deleted: int
    def __init__(self, upserted: _Optional[int] = ..., deleted: _Optional[int] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("id", "name", "num_chunks", "metadata")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    num_chunks: int
    metadata: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., num_chunks: _Optional[int] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListDocumentsRequest(_message.Message):
    __slots__ = ("collection", "limit", "offset")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    collection: str
    limit: int
    offset: int
    def __init__(self, collection: _Optional[str] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class ListDocumentsResponse(_message.Message):
    __slots__ = ("documents", "total")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    total: int
    def __init__(self, documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., total: _Optional[int] = ...) -> None: ...

class DeleteDocumentsRequest(_message.Message):
    __slots__ = ("collection", "document_ids")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, collection: _Optional[str] = ..., document_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteDocumentsResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: _Optional[int] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("collection", "query_text", "query_vector", "mode", "fetch_k", "filter", "fusion", "rrf_k", "dense_weight", "sparse_weight", "candidate_k", "include_vectors")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    QUERY_TEXT_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FETCH_K_FIELD_NUMBER: _ClassVar[int]
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
    fetch_k: int
    filter: _struct_pb2.Struct
    fusion: FusionMethod
    rrf_k: int
    dense_weight: float
    sparse_weight: float
    candidate_k: int
    include_vectors: bool
    def __init__(self, collection: _Optional[str] = ..., query_text: _Optional[str] = ..., query_vector: _Optional[_Iterable[float]] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., fetch_k: _Optional[int] = ..., filter: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., fusion: _Optional[_Union[FusionMethod, str]] = ..., rrf_k: _Optional[int] = ..., dense_weight: _Optional[float] = ..., sparse_weight: _Optional[float] = ..., candidate_k: _Optional[int] = ..., include_vectors: _Optional[bool] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("chunk", "score", "dense_score", "sparse_score", "dense_rank", "sparse_rank")
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
    def __init__(self, chunk: _Optional[_Union[Chunk, _Mapping]] = ..., score: _Optional[float] = ..., dense_score: _Optional[float] = ..., sparse_score: _Optional[float] = ..., dense_rank: _Optional[int] = ..., sparse_rank: _Optional[int] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "mode")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    mode: SearchMode
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., mode: _Optional[_Union[SearchMode, str]] = ...) -> None: ...

class RetrieverInfo(_message.Message):
    __slots__ = ("service", "modes")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    MODES_FIELD_NUMBER: _ClassVar[int]
    service: _common_pb2.ServiceInfo
    modes: _containers.RepeatedScalarFieldContainer[SearchMode]
    def __init__(self, service: _Optional[_Union[_common_pb2.ServiceInfo, _Mapping]] = ..., modes: _Optional[_Iterable[_Union[SearchMode, str]]] = ...) -> None: ...
