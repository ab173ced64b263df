"""Conversions between protobuf Struct (JSON-like metadata and filters) and Python dicts."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format, struct_pb2


def _restore_ints(value: Any) -> Any:
    # Struct stores every number as a double; 2020 must come back as 2020, not 2020.0.
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _restore_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore_ints(v) for v in value]
    return value


def struct_to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    return _restore_ints(json_format.MessageToDict(struct))


def dict_to_struct(data: dict[str, Any] | None) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    if data:
        struct.update(data)
    return struct
