"""Metadata filters for search: parsing and validation, a Milvus boolean expression, and a
Python predicate for backends that filter in process.

A filter is a JSON-like dict (it arrives as a protobuf Struct, so every number is a float):

    {"year": 2021}                                   equality
    {"year": {"$gte": 2020, "$lt": 2024}}            operators on one field are ANDed
    {"tag": {"$in": ["a", "b"]}, "lang": "en"}       top-level keys are ANDed

    {"tags": {"$any": ["a", "b"]}}                   a list field holds a or b
    {"$and": [{"year": 2021}, {"tag": "a"}]}         every object must hold (flattened)

Operators: $eq $ne $gt $gte $lt $lte (one scalar) and $in $nin (a non-empty list of scalars);
on a metadata field whose value is a list, $any (the list shares a value with the given
ones) and $unset_or_any (the same, or the field is missing or null: how the gateway's
mandatory access filter lets documents with no access list through). Scalars are strings,
numbers and booleans. `document_id` and `document_name` are columns of the chunk; every
other field is a key of the chunk's metadata. `$and` takes a list of filter objects: it lets
a caller AND its own conditions with someone else's filter without clashing keys (there is
no $or, so a filter can only narrow what another `$and` branch allows).

A list-valued key that a store mirrors into scalar columns (`MirroredList`: a flag saying the
key is set, and one nullable column per element) gets $any and $unset_or_any as plain column
tests (`slot in [...]`), which Milvus evaluates vectorised or from an index; Milvus Lite runs
`json_contains_any` and `exists` row by row in Python (about 140 us a row).

Semantics both translations share: a condition on a metadata key the chunk lacks (or holds
null) is false, $ne and $nin included, so `{"tag": {"$ne": "a"}}` only matches chunks that
have a tag. Ordering operators compare numbers with numbers and strings with strings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from shared.errors import InvalidArgument

if TYPE_CHECKING:
    from services.retriever.backends.base import ChunkRecord

Scalar: TypeAlias = str | int | float | bool

COLUMN_FIELDS = frozenset({"document_id", "document_name"})
SCALAR_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
LIST_OPS = ("$in", "$nin", "$any", "$unset_or_any")
# Operators that test a list-valued metadata field (never a column, which holds one string).
MEMBERSHIP_OPS = ("$any", "$unset_or_any")
ORDER_OPS = ("$gt", "$gte", "$lt", "$lte")
MAX_LIST_VALUES = 1024
MAX_CONDITIONS = 64
_INT64_MAX = 2**63 - 1
_FIELD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# Control characters other than \t \n \r have no escape every Milvus expression parser
# agrees on, and nobody filters on them on purpose.
_BAD_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_MILVUS_OPS = {"$eq": "==", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


@dataclass(frozen=True)
class Condition:
    """One `field op value` test; `value` is a tuple for $in and $nin."""

    field: str
    op: str
    value: Scalar | tuple[Scalar, ...]

    @property
    def is_column(self) -> bool:
        return self.field in COLUMN_FIELDS


@dataclass(frozen=True)
class MetadataFilter:
    """Conditions that must all hold."""

    conditions: tuple[Condition, ...]


# -- parsing ---------------------------------------------------------------------------


def parse_filter(d: dict[str, Any] | None) -> MetadataFilter | None:
    """Validates a filter dict; None or {} means no filter."""
    if d is None:
        return None
    if not isinstance(d, dict):
        raise InvalidArgument(
            f'filter must be an object like {{"year": 2021}}, got {type(d).__name__}'
        )
    conditions = _parse_object(d, depth=0)
    if not conditions:
        return None
    if len(conditions) > MAX_CONDITIONS:
        raise InvalidArgument(
            f"filter has {len(conditions)} conditions; the limit is {MAX_CONDITIONS}"
        )
    return MetadataFilter(tuple(conditions))


_MAX_AND_DEPTH = 4


def _parse_object(d: dict[str, Any], depth: int) -> list[Condition]:
    conditions: list[Condition] = []
    for field, spec in d.items():
        if field == "$and":
            conditions.extend(_parse_and(spec, depth))
        else:
            conditions.extend(_parse_field(field, spec))
    return conditions


def _parse_and(spec: Any, depth: int) -> list[Condition]:
    if depth >= _MAX_AND_DEPTH:
        raise InvalidArgument(f"filter nests $and more than {_MAX_AND_DEPTH} deep")
    if not isinstance(spec, list | tuple) or not all(isinstance(s, dict) for s in spec):
        raise InvalidArgument('filter $and needs a list of filter objects, e.g. [{"year": 2021}]')
    conditions: list[Condition] = []
    for sub in spec:
        conditions.extend(_parse_object(sub, depth + 1))
        if len(conditions) > MAX_CONDITIONS:
            break  # parse_filter reports the count
    return conditions


def _parse_field(field: Any, spec: Any) -> list[Condition]:
    _check_field_name(field)
    if not isinstance(spec, dict):
        return [_condition(field, "$eq", spec)]
    if not spec:
        raise InvalidArgument(
            f"filter field '{field}' has an empty operator object; "
            f"use one of {', '.join(SCALAR_OPS + LIST_OPS)}"
        )
    return [_condition(field, op, value) for op, value in spec.items()]


def _check_field_name(field: Any) -> None:
    if isinstance(field, str) and field.startswith("$"):
        raise InvalidArgument(
            f"filter key '{field}' is not supported: keys are field names and are ANDed, "
            "or $and with a list of filter objects; $or is not available"
        )
    if not isinstance(field, str) or not _FIELD_RE.fullmatch(field):
        raise InvalidArgument(
            f"filter field name {field!r} is invalid: use 1-64 letters, digits or '_', "
            "not starting with a digit"
        )


def _condition(field: str, op: Any, value: Any) -> Condition:
    if op in SCALAR_OPS:
        scalar = _scalar(field, op, value)
        if op in ORDER_OPS and isinstance(scalar, bool):
            raise InvalidArgument(
                f"filter field '{field}' operator {op} needs a number or a string, not a boolean"
            )
        _check_column_type(field, op, scalar)
        return Condition(field, op, scalar)
    if op in LIST_OPS:
        if op in MEMBERSHIP_OPS and field in COLUMN_FIELDS:
            raise InvalidArgument(
                f"filter field '{field}' operator {op} tests a list-valued metadata field; "
                f"{field} holds one string, so use $in"
            )
        values = _scalar_list(field, op, value)
        for v in values:
            _check_column_type(field, op, v)
        return Condition(field, op, values)
    raise InvalidArgument(
        f"filter field '{field}' uses unknown operator {op!r}; "
        f"use one of {', '.join(SCALAR_OPS + LIST_OPS)}"
    )


def _scalar(field: str, op: str, value: Any) -> Scalar:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if abs(value) > _INT64_MAX:
            raise InvalidArgument(
                f"filter field '{field}' operator {op}: {value} does not fit in 64 bits"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f"filter field '{field}' operator {op}: {value} is not a number")
        # A protobuf Struct turns 2020 into 2020.0; compare it as the integer it was.
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    hint = " (lists go with $in or $nin)" if isinstance(value, list) else ""
    raise InvalidArgument(
        f"filter field '{field}' operator {op} needs a string, number or boolean, "
        f"got {_kind(value)}{hint}"
    )


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _scalar_list(field: str, op: str, value: Any) -> tuple[Scalar, ...]:
    if not isinstance(value, list | tuple):
        raise InvalidArgument(
            f'filter field \'{field}\' operator {op} needs a list, e.g. {{"{op}": ["a", "b"]}}'
        )
    if not value:
        raise InvalidArgument(f"filter field '{field}' operator {op} has an empty list")
    if len(value) > MAX_LIST_VALUES:
        raise InvalidArgument(
            f"filter field '{field}' operator {op} has {len(value)} values; "
            f"the limit is {MAX_LIST_VALUES}"
        )
    return tuple(_scalar(field, op, v) for v in value)


def _check_column_type(field: str, op: str, value: Scalar) -> None:
    if field in COLUMN_FIELDS and not isinstance(value, str):
        raise InvalidArgument(
            f"filter field '{field}' operator {op}: {field} is text; give the value as a string"
        )
    if isinstance(value, str) and _BAD_CONTROL_RE.search(value):
        raise InvalidArgument(
            f"filter field '{field}' operator {op}: the value contains control characters"
        )


# -- Milvus expression -----------------------------------------------------------------


def quote_string(value: str) -> str:
    """A Milvus string literal; the escapes keep a value from ending the literal early."""
    if _BAD_CONTROL_RE.search(value):
        raise InvalidArgument(f"value {value!r} contains control characters; remove them")
    return '"' + "".join(_ESCAPES.get(ch, ch) for ch in value) + '"'


def literal(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return quote_string(value)
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def string_list(values: list[str]) -> str:
    """`["a", "b"]` with every element quoted, for `field in [...]`."""
    return "[" + ", ".join(quote_string(v) for v in values) + "]"


@dataclass(frozen=True)
class MirroredList:
    """Scalar columns holding a list-valued metadata key: `listed` is true when the key is set
    (not missing, not null), whatever it holds; `slots` hold its string elements in order,
    null past the last. A scalar where a list belongs is listed with no slots, so it matches
    nothing, as `_holds` has it."""

    listed: str
    slots: tuple[str, ...]


def to_milvus_expr(f: MetadataFilter, mirrored: Mapping[str, MirroredList] | None = None) -> str:
    """`mirrored`: the collection's list-valued keys kept in scalar columns, by key."""
    return " and ".join(_condition_expr(c, mirrored or {}) for c in f.conditions)


def _mirrored_expr(c: Condition, columns: MirroredList) -> str:
    assert isinstance(c.value, tuple)
    values = "[" + ", ".join(literal(v) for v in c.value) + "]"
    tests = [f"{slot} in {values}" for slot in columns.slots]
    if c.op == "$unset_or_any":
        tests.insert(0, f"{columns.listed} == false")
    return "(" + " or ".join(tests) + ")"


def _condition_expr(c: Condition, mirrored: Mapping[str, MirroredList]) -> str:
    columns = mirrored.get(c.field)
    if (
        columns is not None
        and c.op in MEMBERSHIP_OPS
        # The slots hold strings only; another kind of value is left to the JSON test.
        and all(isinstance(v, str) for v in c.value)  # type: ignore[union-attr]
    ):
        return _mirrored_expr(c, columns)
    lhs = c.field if c.is_column else f"metadata[{quote_string(c.field)}]"
    if c.op in _MILVUS_OPS:
        assert not isinstance(c.value, tuple)
        return f"{lhs} {_MILVUS_OPS[c.op]} {literal(c.value)}"
    assert isinstance(c.value, tuple)
    if c.is_column:
        keyword = "in" if c.op == "$in" else "not in"
        return f"{lhs} {keyword} [{', '.join(literal(v) for v in c.value)}]"
    values = ", ".join(literal(v) for v in c.value)
    if c.op == "$any":
        return f"json_contains_any({lhs}, [{values}])"
    if c.op == "$unset_or_any":
        # `exists` is false for a missing key and for a null, as `_holds` has it.
        return f"(not exists {lhs} or json_contains_any({lhs}, [{values}]))"
    # Milvus Lite only accepts `in` on plain columns, so JSON keys get an OR (AND) chain;
    # Milvus server evaluates the chain the same way.
    if c.op == "$in":
        return "(" + " or ".join(f"{lhs} == {literal(v)}" for v in c.value) + ")"
    return "(" + " and ".join(f"{lhs} != {literal(v)}" for v in c.value) + ")"


# -- Python predicate ------------------------------------------------------------------

_MISSING = object()


def matches(f: MetadataFilter | None, chunk: ChunkRecord) -> bool:
    if f is None:
        return True
    return all(_holds(c, _field_value(c, chunk)) for c in f.conditions)


def _field_value(c: Condition, chunk: ChunkRecord) -> Any:
    if c.is_column:
        return getattr(chunk, c.field)
    return chunk.metadata.get(c.field, _MISSING)


def _holds(c: Condition, actual: Any) -> bool:
    if actual is _MISSING or actual is None:
        return c.op == "$unset_or_any"
    if c.op in MEMBERSHIP_OPS:
        # Only a list holds members: a scalar where a list belongs matches nothing (as
        # Milvus's json_contains_any has it), so a malformed access list fails closed.
        return isinstance(actual, list) and any(
            _equal(a, v)
            for a in actual
            for v in c.value  # type: ignore[union-attr]
        )
    if c.op == "$in":
        return any(_equal(actual, v) for v in c.value)  # type: ignore[union-attr]
    if c.op == "$nin":
        return not any(_equal(actual, v) for v in c.value)  # type: ignore[union-attr]
    if c.op == "$eq":
        return _equal(actual, c.value)
    if c.op == "$ne":
        return not _equal(actual, c.value)
    return _ordered(actual, c.op, c.value)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _equal(actual: Any, expected: Any) -> bool:
    # Python's True == 1 would let a boolean flag match a count; keep the kinds apart.
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if _is_number(actual) and _is_number(expected):
        return bool(actual == expected)
    return isinstance(actual, str) and isinstance(expected, str) and actual == expected


def _ordered(actual: Any, op: str, bound: Any) -> bool:
    comparable = (_is_number(actual) and _is_number(bound)) or (
        isinstance(actual, str) and isinstance(bound, str)
    )
    if not comparable:
        return False
    if op == "$gt":
        return bool(actual > bound)
    if op == "$gte":
        return bool(actual >= bound)
    if op == "$lt":
        return bool(actual < bound)
    return bool(actual <= bound)
