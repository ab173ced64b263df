from shared.proto.ragrail.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

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
    __slots__ = ("rail", "verdict", "reason", "duration_ms", "errored")
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
    def __init__(self, rail: _Optional[str] = ..., verdict: _Optional[_Union[Verdict, str]] = ..., reason: _Optional[str] = ..., duration_ms: _Optional[float] = ..., errored: _Optional[bool] = ...) -> None: ...

class RailResult(_message.Message):
    __slots__ = ("verdict", "rail", "reason", "modified_text", "activations", "duration_ms")
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
    def __init__(self, verdict: _Optional[_Union[Verdict, str]] = ..., rail: _Optional[str] = ..., reason: _Optional[str] = ..., modified_text: _Optional[str] = ..., activations: _Optional[_Iterable[_Union[RailActivation, _Mapping]]] = ..., duration_ms: _Optional[float] = ...) -> None: ...

class CheckInputRequest(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[_common_pb2.ChatMessage, _Mapping]]] = ...) -> None: ...

class CheckRetrievalRequest(_message.Message):
    __slots__ = ("query", "chunks")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    query: str
    chunks: _containers.RepeatedCompositeFieldContainer[_common_pb2.TextPassage]
    def __init__(self, query: _Optional[str] = ..., chunks: _Optional[_Iterable[_Union[_common_pb2.TextPassage, _Mapping]]] = ...) -> None: ...

class ChunkVerdict(_message.Message):
    __slots__ = ("id", "result")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    id: str
    result: RailResult
    def __init__(self, id: _Optional[str] = ..., result: _Optional[_Union[RailResult, _Mapping]] = ...) -> None: ...

class CheckRetrievalResponse(_message.Message):
    __slots__ = ("chunks", "duration_ms")
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[ChunkVerdict]
    duration_ms: float
    def __init__(self, chunks: _Optional[_Iterable[_Union[ChunkVerdict, _Mapping]]] = ..., duration_ms: _Optional[float] = ...) -> None: ...

class CheckOutputRequest(_message.Message):
    __slots__ = ("messages", "answer", "context", "grounded")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    GROUNDED_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    answer: str
    context: _containers.RepeatedCompositeFieldContainer[_common_pb2.TextPassage]
    grounded: bool
    def __init__(self, messages: _Optional[_Iterable[_Union[_common_pb2.ChatMessage, _Mapping]]] = ..., answer: _Optional[str] = ..., context: _Optional[_Iterable[_Union[_common_pb2.TextPassage, _Mapping]]] = ..., grounded: _Optional[bool] = ...) -> None: ...

class GuardrailsInfo(_message.Message):
    __slots__ = ("service", "input_rails", "retrieval_rails", "output_rails")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    INPUT_RAILS_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_RAILS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_RAILS_FIELD_NUMBER: _ClassVar[int]
    service: _common_pb2.ServiceInfo
    input_rails: _containers.RepeatedScalarFieldContainer[str]
    retrieval_rails: _containers.RepeatedScalarFieldContainer[str]
    output_rails: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, service: _Optional[_Union[_common_pb2.ServiceInfo, _Mapping]] = ..., input_rails: _Optional[_Iterable[str]] = ..., retrieval_rails: _Optional[_Iterable[str]] = ..., output_rails: _Optional[_Iterable[str]] = ...) -> None: ...
