from shared.proto.ragrail.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RerankRequest(_message.Message):
    __slots__ = ("query", "passages", "top_n", "score_threshold")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    PASSAGES_FIELD_NUMBER: _ClassVar[int]
    TOP_N_FIELD_NUMBER: _ClassVar[int]
    SCORE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    query: str
    passages: _containers.RepeatedCompositeFieldContainer[_common_pb2.TextPassage]
    top_n: int
    score_threshold: float
    def __init__(self, query: _Optional[str] = ..., passages: _Optional[_Iterable[_Union[_common_pb2.TextPassage, _Mapping]]] = ..., top_n: _Optional[int] = ..., score_threshold: _Optional[float] = ...) -> None: ...

class RankedPassage(_message.Message):
    __slots__ = ("index", "score", "passage")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    PASSAGE_FIELD_NUMBER: _ClassVar[int]
    index: int
    score: float
    passage: _common_pb2.TextPassage
    def __init__(self, index: _Optional[int] = ..., score: _Optional[float] = ..., passage: _Optional[_Union[_common_pb2.TextPassage, _Mapping]] = ...) -> None: ...

class RerankResponse(_message.Message):
    __slots__ = ("results", "model")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RankedPassage]
    model: str
    def __init__(self, results: _Optional[_Iterable[_Union[RankedPassage, _Mapping]]] = ..., model: _Optional[str] = ...) -> None: ...

class RerankerInfo(_message.Message):
    __slots__ = ("service", "max_length")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    MAX_LENGTH_FIELD_NUMBER: _ClassVar[int]
    service: _common_pb2.ServiceInfo
    max_length: int
    def __init__(self, service: _Optional[_Union[_common_pb2.ServiceInfo, _Mapping]] = ..., max_length: _Optional[int] = ...) -> None: ...
