"""Checks every storage backend makes before it writes or searches, in one place.

The servicer validates requests too, but a backend is also called directly (the launcher,
trainers' evaluation, tests), and a backend must never store what it cannot read back. So
the stores run these checks themselves: the `VectorStore` base before each backend's hook
(names, pages, k, query vectors), and each backend's upsert on its chunks (`check_chunk`).
Because they live here, FAISS and Milvus refuse the same input with the same words. What
differs per store is passed in: Milvus limits its VARCHAR columns in UTF-8 bytes
(`FieldLimits`), FAISS stores text in SQLite with no limit.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shared.errors import InvalidArgument
from shared.formats import ACCESS_GROUPS, MAX_ACCESS_GROUPS

if TYPE_CHECKING:
    from services.retriever.backends.base import ChunkRecord

# Milvus's limits for a FLOAT_VECTOR and for one search; FAISS keeps them so that both
# backends refuse the same requests.
MAX_DIMENSION = 32_768
MAX_K = 16_384
MAX_DESCRIPTION_CHARS = 4_096

COLLECTION_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
COLLECTION_NAME_RULE = "1-64 characters: lowercase letters, digits and '_', starting with a letter"


@dataclass(frozen=True)
class FieldLimits:
    """UTF-8 byte limits of a store's string columns (None: no limit), and the store's name
    for the message that reports one exceeded."""

    store: str = ""
    id_bytes: int | None = None
    name_bytes: int | None = None
    text_bytes: int | None = None
    metadata_bytes: int | None = None


NO_LIMITS = FieldLimits()


@dataclass(frozen=True)
class CheckedChunk:
    """A chunk that passed `check_chunk`: its vector as finite floats and its metadata as
    JSON text (what FAISS stores; Milvus stores the dict itself)."""

    where: str  # "chunk '<id>'", the start of any later message about it
    vector: list[float]
    metadata_json: str


def validate_collection_name(name: str) -> str:
    if not isinstance(name, str) or not COLLECTION_NAME_RE.fullmatch(name):
        raise InvalidArgument(f"collection name {name!r} is invalid: use {COLLECTION_NAME_RULE}")
    return name


def is_collection_name(name: str) -> bool:
    """For telling a store's own collections from other entries when listing."""
    return COLLECTION_NAME_RE.fullmatch(name) is not None


def validate_k(k: int, limit: int = MAX_K) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or not 0 < k <= limit:
        raise InvalidArgument(f"k must be between 1 and {limit}, got {k!r}")


def check_page(limit: int, offset: int) -> None:
    if limit < 0 or offset < 0:
        raise InvalidArgument(f"limit and offset must not be negative, got {limit}, {offset}")


def check_choice(what: str, value: str, choices: Iterable[str]) -> None:
    """An option naming one of a fixed set (an index type, say)."""
    allowed = sorted(choices)
    if value not in allowed:
        raise InvalidArgument(f"unknown {what} '{value}'; choose one of {allowed}")


def check_new_collection(dimension: int, description: str) -> None:
    if isinstance(dimension, bool) or not isinstance(dimension, int):
        raise InvalidArgument(f"dimension must be an integer, got {dimension!r}")
    if not 0 < dimension <= MAX_DIMENSION:
        raise InvalidArgument(
            f"dimension must be between 1 and {MAX_DIMENSION}, got {dimension}; "
            "use the embedder's dimension"
        )
    if not isinstance(description, str):
        raise InvalidArgument("description must be a string")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise InvalidArgument(
            f"description has {len(description)} characters; keep it to {MAX_DESCRIPTION_CHARS}"
        )


def check_text(
    where: str,
    field: str,
    value: Any,
    *,
    required: bool = False,
    max_bytes: int | None = None,
    store: str = "",
) -> None:
    if not isinstance(value, str):
        raise InvalidArgument(f"{where}: {field} must be a string")
    if required and not value:
        raise InvalidArgument(f"{where}: {field} is empty")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:  # lone surrogates: SQLite and Milvus fail on them later
        raise InvalidArgument(f"{where}: {field} is not valid Unicode text") from exc
    if max_bytes is not None and size > max_bytes:
        raise InvalidArgument(
            f"{where}: {field} is {size} bytes in UTF-8, more than the {max_bytes} {store} "
            "stores; shorten it"
        )


def metadata_json(where: str, metadata: Any, max_bytes: int | None = None) -> str:
    """The metadata as JSON text; InvalidArgument unless it is a plain JSON object."""
    if not isinstance(metadata, dict):
        raise InvalidArgument(f"{where}: metadata must be an object")
    try:
        encoded = json.dumps(metadata, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{where}: metadata is not plain JSON ({exc})") from exc
    if max_bytes is not None and len(encoded.encode("utf-8")) > max_bytes:
        raise InvalidArgument(
            f"{where}: metadata is larger than {max_bytes} bytes as JSON; trim it"
        )
    return encoded


def check_access_list(where: str, metadata: Any) -> None:
    """At most MAX_ACCESS_GROUPS groups, on every backend: Milvus keeps one column per group.
    What the list holds is not checked: a malformed list matches no group (filters.py)."""
    groups = metadata.get(ACCESS_GROUPS) if isinstance(metadata, dict) else None
    if isinstance(groups, list) and len(groups) > MAX_ACCESS_GROUPS:
        raise InvalidArgument(
            f"{where}: metadata.{ACCESS_GROUPS} lists {len(groups)} groups; a document may "
            f"name at most {MAX_ACCESS_GROUPS} (make a group that covers several teams)"
        )


def _finite(values: Sequence[Any]) -> list[float] | None:
    """The values as floats, or None when one is not a finite number."""
    try:
        floats = [float(x) for x in values]
    except (TypeError, ValueError):
        return None
    return floats if all(map(math.isfinite, floats)) else None


def check_chunk(
    chunk: ChunkRecord, dimension: int, collection: str, limits: FieldLimits = NO_LIMITS
) -> CheckedChunk:
    """Everything about one chunk to write that does not depend on how it is stored."""
    where = f"chunk '{chunk.id}'"
    store = limits.store
    check_text(where, "id", chunk.id, required=True, max_bytes=limits.id_bytes, store=store)
    check_text(
        where, "document_id", chunk.document_id, required=True, max_bytes=limits.id_bytes,
        store=store,
    )  # fmt: skip
    check_text(where, "document_name", chunk.document_name, max_bytes=limits.name_bytes,
               store=store)  # fmt: skip
    check_text(where, "text", chunk.text, max_bytes=limits.text_bytes, store=store)
    if len(chunk.vector) != dimension:
        raise InvalidArgument(
            f"{where} has a {len(chunk.vector)}-dimensional vector but collection "
            f"'{collection}' stores {dimension}-dimensional ones; embed it with the "
            "collection's model"
        )
    vector = _finite(chunk.vector)
    if vector is None:
        raise InvalidArgument(f"{where}: the vector contains NaN or infinity; check the embedder")
    if (
        isinstance(chunk.chunk_index, bool)
        or not isinstance(chunk.chunk_index, int)
        or not 0 <= chunk.chunk_index < 2**63
    ):
        raise InvalidArgument(f"{where}: chunk_index must be a non-negative integer")
    check_access_list(where, chunk.metadata)
    return CheckedChunk(where, vector, metadata_json(where, chunk.metadata, limits.metadata_bytes))


def check_query_vector(vector: Sequence[Any], dimension: int, collection: str) -> list[float]:
    """The query vector as finite floats of the collection's dimension."""
    if len(vector) != dimension:
        raise InvalidArgument(
            f"the query vector has {len(vector)} dimensions but collection '{collection}' "
            f"stores {dimension}; embed the query with the model the collection was built with"
        )
    floats = _finite(vector)
    if floats is None:
        raise InvalidArgument("the query vector contains NaN or infinity; check the embedder")
    return floats
