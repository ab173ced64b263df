from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper

from shared.proto.ragrail.v1 import common_pb2 as _common_pb2

DESCRIPTOR: _descriptor.FileDescriptor

class Verdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_UNSPECIFIED: _ClassVar[Verdict]
    VERDICT_ALLOW: _ClassVar[Verdict]
    VERDICT_BLOCK: _ClassVar[Verdict]
    VERDICT_MODIFY: _ClassVar[Verdict]

VERDICT_UNSPECIFIED: Verdict
VERDICT_ALLOW: Verdict
VERDICT_BLOCK: Verdict
VERDICT_MODIFY: Verdict

class RailActivation(_message.Message):
    __slots__ = ("duration_ms", "errored", "rail", "reason", "verdict")
    RAIL_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    ERRORED_FIELD_NUMBER: _ClassVar[int]
    rail: str
    verdict: Verdict
    reason: str
    duration_ms: float
    errored: bool
    def __init__(
        self,
        rail: str | None = ...,
        verdict: Verdict | str | None = ...,
        reason: str | None = ...,
        duration_ms: float | None = ...,
        errored: bool | None = ...,
    ) -> None: ...

class RailResult(_message.Message):
    __slots__ = ("activations", "duration_ms", "modified_text", "rail", "reason", "verdict")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    RAIL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_TEXT_FIELD_NUMBER: _ClassVar[int]
    ACTIVATIONS_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    verdict: Verdict
    rail: str
    reason: str
    modified_text: str
    activations: _containers.RepeatedCompositeFieldContainer[RailActivation]
    duration_ms: float
    def __init__(
        self,
        verdict: Verdict | str | None = ...,
        rail: str | None = ...,
        reason: str | None = ...,
        modified_text: str | None = ...,
        activations: _Iterable[RailActivation | _Mapping] | None = ...,
        duration_ms: float | None = ...,
    ) -> None: ...

class CheckInputRequest(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    def __init__(
        self, messages: _Iterable[_common_pb2.ChatMessage | _Mapping] | None = ...
    ) -> None: ...

class CheckRetrievalRequest(_message.Message):
    __slots__ = ("chunks", "query")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    query: str
    chunks: _containers.RepeatedCompositeFieldContainer[_common_pb2.TextPassage]
    def __init__(
        self,
        query: str | None = ...,
        chunks: _Iterable[_common_pb2.TextPassage | _Mapping] | None = ...,
    ) -> None: ...

class ChunkVerdict(_message.Message):
    __slots__ = ("id", "result")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    id: str
    result: RailResult
    def __init__(
        self, id: str | None = ..., result: RailResult | _Mapping | None = ...
    ) -> None: ...

class CheckRetrievalResponse(_message.Message):
    __slots__ = ("chunks", "duration_ms")
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[ChunkVerdict]
    duration_ms: float
    def __init__(
        self,
        chunks: _Iterable[ChunkVerdict | _Mapping] | None = ...,
        duration_ms: float | None = ...,
    ) -> None: ...

class CheckOutputRequest(_message.Message):
    __slots__ = ("answer", "context", "messages")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    answer: str
    context: _containers.RepeatedCompositeFieldContainer[_common_pb2.TextPassage]
    def __init__(
        self,
        messages: _Iterable[_common_pb2.ChatMessage | _Mapping] | None = ...,
        answer: str | None = ...,
        context: _Iterable[_common_pb2.TextPassage | _Mapping] | None = ...,
    ) -> None: ...

class GuardrailsInfo(_message.Message):
    __slots__ = ("input_rails", "output_rails", "retrieval_rails", "service")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    INPUT_RAILS_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_RAILS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_RAILS_FIELD_NUMBER: _ClassVar[int]
    service: _common_pb2.ServiceInfo
    input_rails: _containers.RepeatedScalarFieldContainer[str]
    retrieval_rails: _containers.RepeatedScalarFieldContainer[str]
    output_rails: _containers.RepeatedScalarFieldContainer[str]
    def __init__(
        self,
        service: _common_pb2.ServiceInfo | _Mapping | None = ...,
        input_rails: _Iterable[str] | None = ...,
        retrieval_rails: _Iterable[str] | None = ...,
        output_rails: _Iterable[str] | None = ...,
    ) -> None: ...
