from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers

DESCRIPTOR: _descriptor.FileDescriptor

class InfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServiceInfo(_message.Message):
    __slots__ = ("backend", "details", "model", "service", "version")
    class DetailsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: str | None = ..., value: str | None = ...) -> None: ...

    SERVICE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    service: str
    version: str
    backend: str
    model: str
    details: _containers.ScalarMap[str, str]
    def __init__(
        self,
        service: str | None = ...,
        version: str | None = ...,
        backend: str | None = ...,
        model: str | None = ...,
        details: _Mapping[str, str] | None = ...,
    ) -> None: ...

class ChatMessage(_message.Message):
    __slots__ = ("content", "role")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: str | None = ..., content: str | None = ...) -> None: ...

class TextPassage(_message.Message):
    __slots__ = ("id", "metadata", "text")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    metadata: _struct_pb2.Struct
    def __init__(
        self,
        id: str | None = ...,
        text: str | None = ...,
        metadata: _struct_pb2.Struct | _Mapping | None = ...,
    ) -> None: ...
