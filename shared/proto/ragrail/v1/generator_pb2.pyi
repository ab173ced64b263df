from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper

from shared.proto.ragrail.v1 import common_pb2 as _common_pb2

DESCRIPTOR: _descriptor.FileDescriptor

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_STOP: _ClassVar[FinishReason]
    FINISH_REASON_LENGTH: _ClassVar[FinishReason]
    FINISH_REASON_CANCELLED: _ClassVar[FinishReason]

FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_CANCELLED: FinishReason

class SamplingParams(_message.Message):
    __slots__ = (
        "max_tokens",
        "repetition_penalty",
        "seed",
        "stop",
        "temperature",
        "top_k",
        "top_p",
    )
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    REPETITION_PENALTY_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    seed: int
    repetition_penalty: float
    def __init__(
        self,
        temperature: float | None = ...,
        top_p: float | None = ...,
        top_k: int | None = ...,
        max_tokens: int | None = ...,
        stop: _Iterable[str] | None = ...,
        seed: int | None = ...,
        repetition_penalty: float | None = ...,
    ) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ("messages", "request_id", "sampling")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    sampling: SamplingParams
    request_id: str
    def __init__(
        self,
        messages: _Iterable[_common_pb2.ChatMessage | _Mapping] | None = ...,
        sampling: SamplingParams | _Mapping | None = ...,
        request_id: str | None = ...,
    ) -> None: ...

class Usage(_message.Message):
    __slots__ = ("completion_tokens", "prompt_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    def __init__(
        self, prompt_tokens: int | None = ..., completion_tokens: int | None = ...
    ) -> None: ...

class GenerationTiming(_message.Message):
    __slots__ = ("inter_token_latency_ms", "time_to_first_token_ms", "total_ms")
    TIME_TO_FIRST_TOKEN_MS_FIELD_NUMBER: _ClassVar[int]
    INTER_TOKEN_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MS_FIELD_NUMBER: _ClassVar[int]
    time_to_first_token_ms: float
    inter_token_latency_ms: float
    total_ms: float
    def __init__(
        self,
        time_to_first_token_ms: float | None = ...,
        inter_token_latency_ms: float | None = ...,
        total_ms: float | None = ...,
    ) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("finish_reason", "model", "text", "timing", "usage")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    text: str
    finish_reason: FinishReason
    usage: Usage
    timing: GenerationTiming
    model: str
    def __init__(
        self,
        text: str | None = ...,
        finish_reason: FinishReason | str | None = ...,
        usage: Usage | _Mapping | None = ...,
        timing: GenerationTiming | _Mapping | None = ...,
        model: str | None = ...,
    ) -> None: ...

class GenerateChunk(_message.Message):
    __slots__ = ("delta", "finish_reason", "timing", "usage")
    DELTA_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    delta: str
    finish_reason: FinishReason
    usage: Usage
    timing: GenerationTiming
    def __init__(
        self,
        delta: str | None = ...,
        finish_reason: FinishReason | str | None = ...,
        usage: Usage | _Mapping | None = ...,
        timing: GenerationTiming | _Mapping | None = ...,
    ) -> None: ...

class CountTokensRequest(_message.Message):
    __slots__ = ("messages", "texts")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    texts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(
        self,
        messages: _Iterable[_common_pb2.ChatMessage | _Mapping] | None = ...,
        texts: _Iterable[str] | None = ...,
    ) -> None: ...

class CountTokensResponse(_message.Message):
    __slots__ = ("context_length", "prompt_tokens", "text_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    text_tokens: _containers.RepeatedScalarFieldContainer[int]
    context_length: int
    def __init__(
        self,
        prompt_tokens: int | None = ...,
        text_tokens: _Iterable[int] | None = ...,
        context_length: int | None = ...,
    ) -> None: ...

class GeneratorInfo(_message.Message):
    __slots__ = ("context_length", "max_output_tokens", "service")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    service: _common_pb2.ServiceInfo
    context_length: int
    max_output_tokens: int
    def __init__(
        self,
        service: _common_pb2.ServiceInfo | _Mapping | None = ...,
        context_length: int | None = ...,
        max_output_tokens: int | None = ...,
    ) -> None: ...
