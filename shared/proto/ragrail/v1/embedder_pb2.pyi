from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper

from shared.proto.ragrail.v1 import common_pb2 as _common_pb2

DESCRIPTOR: _descriptor.FileDescriptor

class InputType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INPUT_TYPE_UNSPECIFIED: _ClassVar[InputType]
    INPUT_TYPE_QUERY: _ClassVar[InputType]
    INPUT_TYPE_PASSAGE: _ClassVar[InputType]

INPUT_TYPE_UNSPECIFIED: InputType
INPUT_TYPE_QUERY: InputType
INPUT_TYPE_PASSAGE: InputType

class EmbedRequest(_message.Message):
    __slots__ = ("input_type", "texts")
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TYPE_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    input_type: InputType
    def __init__(
        self, texts: _Iterable[str] | None = ..., input_type: InputType | str | None = ...
    ) -> None: ...

class Embedding(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Iterable[float] | None = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("dimension", "embeddings", "model", "total_tokens")
    EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    embeddings: _containers.RepeatedCompositeFieldContainer[Embedding]
    dimension: int
    model: str
    total_tokens: int
    def __init__(
        self,
        embeddings: _Iterable[Embedding | _Mapping] | None = ...,
        dimension: int | None = ...,
        model: str | None = ...,
        total_tokens: int | None = ...,
    ) -> None: ...

class TokenizeRequest(_message.Message):
    __slots__ = ("texts",)
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, texts: _Iterable[str] | None = ...) -> None: ...

class TokenizedText(_message.Message):
    __slots__ = ("ends", "num_tokens", "starts")
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STARTS_FIELD_NUMBER: _ClassVar[int]
    ENDS_FIELD_NUMBER: _ClassVar[int]
    num_tokens: int
    starts: _containers.RepeatedScalarFieldContainer[int]
    ends: _containers.RepeatedScalarFieldContainer[int]
    def __init__(
        self,
        num_tokens: int | None = ...,
        starts: _Iterable[int] | None = ...,
        ends: _Iterable[int] | None = ...,
    ) -> None: ...

class TokenizeResponse(_message.Message):
    __slots__ = ("texts",)
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedCompositeFieldContainer[TokenizedText]
    def __init__(self, texts: _Iterable[TokenizedText | _Mapping] | None = ...) -> None: ...

class EmbedderInfo(_message.Message):
    __slots__ = (
        "dimension",
        "max_length",
        "normalized",
        "passage_prefix",
        "query_prefix",
        "service",
    )
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    MAX_LENGTH_FIELD_NUMBER: _ClassVar[int]
    NORMALIZED_FIELD_NUMBER: _ClassVar[int]
    QUERY_PREFIX_FIELD_NUMBER: _ClassVar[int]
    PASSAGE_PREFIX_FIELD_NUMBER: _ClassVar[int]
    service: _common_pb2.ServiceInfo
    dimension: int
    max_length: int
    normalized: bool
    query_prefix: str
    passage_prefix: str
    def __init__(
        self,
        service: _common_pb2.ServiceInfo | _Mapping | None = ...,
        dimension: int | None = ...,
        max_length: int | None = ...,
        normalized: bool | None = ...,
        query_prefix: str | None = ...,
        passage_prefix: str | None = ...,
    ) -> None: ...
