"""Validation at the edge: what every request field must satisfy before it reaches protobuf,
Milvus or a model, so that a client's mistake is a 4xx naming the field, never a 500.

- Integers are bounded by the protobuf type they travel in (`INT32_MAX`, `INT64_*`): Python
  ints are unbounded, protobuf's are not, and an overflow surfaced as a 500 from the encoder.
- Strings must be encodable as UTF-8: JSON's `\\ud800` escape decodes to a lone surrogate,
  which protobuf, SQLite and Milvus all refuse later. `JsonBodyGuard` finds them in any JSON
  body, with the path of the field, at the cost of one regex scan when there are none.
- Free-form JSON (search filters, document metadata) is bounded in depth and size and holds
  only finite numbers that a protobuf Struct (a double) carries exactly: a 60-level filter
  exceeded protobuf's recursion limit, and `1e400` or a 400-digit integer broke the encoder.
- Document ids are printable text, checked before anything is stored: an id with a control
  character cannot be named in a Milvus expression, so its document could not be listed or
  deleted afterwards.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator
from starlette.types import Message, Receive, Scope, Send

from services.gateway.http.asgi import HttpMiddleware
from services.gateway.http.errors import error_response
from shared.errors import InvalidArgument

INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# A protobuf Struct holds every number as a double: integers beyond 2^53 would come back as
# another number, so they are refused rather than silently changed.
MAX_EXACT_INT = 2**53
MAX_FILTER_DEPTH = 8  # the filter grammar needs 3: {"field": {"$in": [values]}}
MAX_METADATA_DEPTH = 16
MAX_JSON_NODES = 10_000  # objects, arrays and values in one filter or metadata object
MAX_DOCUMENT_ID_CHARS = 256

# Characters no id may hold: control characters (C0 and C1; tab and newline too), lone
# surrogates, and line or paragraph separators. Other non-printing characters (a narrow
# no-break space, as in macOS screenshot names, or a zero-width joiner in an emoji) are real
# file names' and stay allowed.
_BAD_ID_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


def _path(parts: list[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def lone_surrogate_path(value: Any, where: list[str | int] | None = None) -> str | None:
    """The path of the first string (or object key) in `value` that is not valid Unicode
    (a lone surrogate), or None."""
    stack: list[tuple[Any, list[str | int]]] = [(value, where or [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return _path(path) or "body"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not _encodable(key):
                    return _path([*path, key.encode("utf-8", "backslashreplace").decode()])
                stack.append((child, [*path, key]))
        elif isinstance(item, list):
            stack.extend((child, [*path, i]) for i, child in enumerate(item))
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_text(text: str, field: str) -> str:
    if not _encodable(text):
        raise ValueError(f"{field} is not valid Unicode text (it holds a lone surrogate)")
    return text


def check_json(value: Any, field: str, max_depth: int) -> None:
    """Raises ValueError naming the place in `value` that a protobuf Struct cannot carry as
    sent: nesting deeper than max_depth, more than MAX_JSON_NODES values, a number that is
    not finite or an integer beyond 2^53, a string that is not valid Unicode."""
    nodes = 0
    stack: list[tuple[Any, list[str | int], int]] = [(value, [field], 0)]
    while stack:
        item, path, depth = stack.pop()
        nodes += 1
        if nodes > MAX_JSON_NODES:
            raise ValueError(f"{field} holds more than {MAX_JSON_NODES} values; send less")
        if isinstance(item, dict | list):
            if depth >= max_depth:
                raise ValueError(
                    f"{_path(path)} is nested deeper than {max_depth} levels "
                    f"(the most {field} may have)"
                )
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str) or not _encodable(key):
                        raise ValueError(f"{_path(path)} has a key that is not valid Unicode")
                    stack.append((child, [*path, key], depth + 1))
            else:
                stack.extend((child, [*path, i], depth + 1) for i, child in enumerate(item))
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if abs(item) > MAX_EXACT_INT:
                raise ValueError(
                    f"{_path(path)}: the integer is out of range; numbers must lie within "
                    f"±2^53 (send larger ones as strings)"
                )
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(f"{_path(path)}: numbers must be finite (not NaN or infinity)")
        elif isinstance(item, str):
            if not _encodable(item):
                raise ValueError(f"{_path(path)} is not valid Unicode text (a lone surrogate)")
        else:
            raise ValueError(f"{_path(path)}: {type(item).__name__} is not a JSON value")


def _filter(value: dict[str, Any]) -> dict[str, Any]:
    check_json(value, "filter", MAX_FILTER_DEPTH)
    return value


def _metadata(value: dict[str, Any]) -> dict[str, Any]:
    check_json(value, "metadata", MAX_METADATA_DEPTH)
    return value


def _text(value: str) -> str:
    return check_text(value, "the text")


# Types for the request schemas: pydantic runs the check after its own, and its error names
# the field (`filter.year.$gt: ...`).
FilterObject = Annotated[dict[str, Any], AfterValidator(_filter)]
MetadataObject = Annotated[dict[str, Any], AfterValidator(_metadata)]
UnicodeText = Annotated[str, AfterValidator(_text)]


def check_document_id(doc_id: str, field: str) -> str:
    """A document id as stored: stripped, 1-256 characters, none of them a control character
    or a lone surrogate. InvalidArgument (422) naming `field` otherwise."""
    doc_id = doc_id.strip()
    if not doc_id or len(doc_id) > MAX_DOCUMENT_ID_CHARS:
        shown = doc_id[:40].encode("utf-8", "backslashreplace").decode()
        raise InvalidArgument(
            f"{field}: document id '{shown}' must be 1-{MAX_DOCUMENT_ID_CHARS} characters"
        )
    for position, char in enumerate(doc_id):
        if unicodedata.category(char) in _BAD_ID_CATEGORIES:
            raise InvalidArgument(
                f"{field}: document id {doc_id[:80]!a} holds U+{ord(char):04X} at "
                f"position {position}; ids must be printable text (rename the file or send "
                "an 'id')"
            )
    return doc_id


# -- the JSON body guard -----------------------------------------------------------------------

# A JSON escape of a UTF-16 surrogate (\ud800-\udfff). A pair of them is a valid character
# (an emoji); only when one is present is the body parsed to look for a lone one.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class JsonBodyGuard(HttpMiddleware):
    """ASGI middleware: a JSON body holding a lone surrogate is answered 422 naming the field,
    for every route at once (chat messages, embeddings input, queries, filters, metadata).
    Such strings decode fine in Python and fail only when protobuf encodes them: a 500."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in _METHODS_WITH_BODY:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if not headers.get(b"content-type", b"").startswith(b"application/json"):
            await self.app(scope, receive, send)
            return
        # The whole body is read here (the route would read it all anyway) and handed on in
        # one message; the size limit still applies, as `receive` is the limited one.
        parts: list[bytes] = []
        last: Message = {"type": "http.request", "body": b"", "more_body": False}
        while True:
            message = await receive()
            if message["type"] != "http.request":
                last = message  # the client left: the route sees that as it would have
                break
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(parts)
        del parts
        if _SURROGATE_ESCAPE.search(body):
            where = _lone_surrogate_in(body)
            if where is not None:
                await error_response(
                    422,
                    f"invalid request: {where}: not valid Unicode text (a lone UTF-16 "
                    "surrogate escape); send UTF-8 text",
                    "InvalidArgument",
                )(scope, receive, send)
                return
        pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
        if last["type"] != "http.request":
            pending.append(last)

        async def replaying_receive() -> Message:
            return pending.pop(0) if pending else await receive()

        await self.app(scope, replaying_receive, send)


def _lone_surrogate_in(body: bytes) -> str | None:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None  # not JSON: the route's own parser says so
    return lone_surrogate_path(value)
