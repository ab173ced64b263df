from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf.internal import containers as _containers

from shared.proto.ragrail.v1 import common_pb2 as _common_pb2

DESCRIPTOR: _descriptor.FileDescriptor

class RerankRequest(_message.Message):
    __slots__ = ("passages", "query", "score_threshold", "top_n")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    PASSAGES_FIELD_NUMBER: _ClassVar[int]
    TOP_N_FIELD_NUMBER: _ClassVar[int]
    SCORE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    query: str
    passages: _containers.RepeatedCompositeFieldContainer[_common_pb2.TextPassage]
    top_n: int
    score_threshold: float
    def __init__(
        self,
        query: str | None = ...,
        passages: _Iterable[_common_pb2.TextPassage | _Mapping] | None = ...,
        top_n: int | None = ...,
        score_threshold: float | None = ...,
    ) -> None: ...

class RankedPassage(_message.Message):
    __slots__ = ("index", "passage", "score")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    PASSAGE_FIELD_NUMBER: _ClassVar[int]
    index: int
    score: float
    passage: _common_pb2.TextPassage
    def __init__(
        self,
        index: int | None = ...,
        score: float | None = ...,
        passage: _common_pb2.TextPassage | _Mapping | None = ...,
    ) -> None: ...

class RerankResponse(_message.Message):
    __slots__ = ("model", "results")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RankedPassage]
    model: str
    def __init__(
        self, results: _Iterable[RankedPassage | _Mapping] | None = ..., model: str | None = ...
    ) -> None: ...

class RerankerInfo(_message.Message):
    __slots__ = ("max_length", "service")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    MAX_LENGTH_FIELD_NUMBER: _ClassVar[int]
    service: _common_pb2.ServiceInfo
    max_length: int
    def __init__(
        self, service: _common_pb2.ServiceInfo | _Mapping | None = ..., max_length: int | None = ...
    ) -> None: ...
