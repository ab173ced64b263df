from shared.proto.ragrail.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

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
    __slots__ = ("texts", "input_type")
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TYPE_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    input_type: InputType
    def __init__(self, texts: _Optional[_Iterable[str]] = ..., input_type: _Optional[_Union[InputType, str]] = ...) -> None: ...

class Embedding(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("embeddings", "dimension", "model", "total_tokens")
    EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    embeddings: _containers.RepeatedCompositeFieldContainer[Embedding]
    dimension: int
    model: str
    total_tokens: int
    def __init__(self, embeddings: _Optional[_Iterable[_Union[Embedding, _Mapping]]] = ..., dimension: _Optional[int] = ..., model: _Optional[str] = ..., total_tokens: _Optional[int] = ...) -> None: ...

class TokenizeRequest(_message.Message):
    __slots__ = ("texts",)
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, texts: _Optional[_Iterable[str]] = ...) -> None: ...

class TokenizedText(_message.Message):
    __slots__ = ("num_tokens", "starts", "ends")
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STARTS_FIELD_NUMBER: _ClassVar[int]
    ENDS_FIELD_NUMBER: _ClassVar[int]
    num_tokens: int
    starts: _containers.RepeatedScalarFieldContainer[int]
    ends: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, num_tokens: _Optional[int] = ..., starts: _Optional[_Iterable[int]] = ..., ends: _Optional[_Iterable[int]] = ...) -> None: ...

class TokenizeResponse(_message.Message):
    __slots__ = ("texts",)
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedCompositeFieldContainer[TokenizedText]
    def __init__(self, texts: _Optional[_Iterable[_Union[TokenizedText, _Mapping]]] = ...) -> None: ...

class EmbedderInfo(_message.Message):
    __slots__ = ("service", "dimension", "max_length", "normalized", "query_prefix", "passage_prefix")
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
    def __init__(self, service: _Optional[_Union[_common_pb2.ServiceInfo, _Mapping]] = ..., dimension: _Optional[int] = ..., max_length: _Optional[int] = ..., normalized: _Optional[bool] = ..., query_prefix: _Optional[str] = ..., passage_prefix: _Optional[str] = ...) -> None: ...
