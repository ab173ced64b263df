"""What a ragrail collection is in Milvus: its fields, indexes and properties, and chunks as
Milvus rows and back.

Each collection holds the chunk columns, a dense `vector` (COSINE) and a `sparse` vector that
Milvus's own BM25 function derives from `terms`, the text as LexicalAnalyzer analysed it;
Milvus only splits it. Lite drops the schema description, but collection properties survive
reopening, so the description and creation time are kept there.

A document's access list (metadata `access_groups`) is also mirrored into scalar columns with
INVERTED indexes, `access_listed` and one nullable `access_<i>` per group, so the gateway's
mandatory filter is a plain column test (filters.MirroredList): on Lite, JSON and array
functions are evaluated row by row in Python (+80 ms a search on 560 chunks), plain columns
vectorised. Collections of schema version 2 have no such columns and keep the JSON test.
"""

from __future__ import annotations

import re
from typing import Any

from pymilvus import DataType, Function, FunctionType, MilvusClient

from services.retriever.analysis import LexicalAnalyzer
from services.retriever.backends.base import ChunkRecord, CollectionRecord
from services.retriever.backends.validation import FieldLimits, check_choice, check_chunk
from services.retriever.filters import MirroredList
from shared.errors import InvalidArgument
from shared.formats import ACCESS_GROUPS, MAX_ACCESS_GROUPS

# The `terms` field holds text already analysed by LexicalAnalyzer; Milvus only splits it.
TERMS_ANALYZER_PARAMS: dict[str, Any] = {"tokenizer": "standard"}

# Build parameters per dense index type; the search parameters go with them.
INDEX_BUILD_PARAMS: dict[str, dict[str, Any]] = {
    "AUTOINDEX": {},
    "FLAT": {},
    "HNSW": {"M": 16, "efConstruction": 200},
    "IVF_FLAT": {"nlist": 128},
}
# VARCHAR limits are in bytes on a Milvus server, so they are checked on UTF-8 bytes here.
MAX_ID_BYTES = 2_048
MAX_NAME_BYTES = 4_096
MAX_TEXT_BYTES = 65_535
MAX_METADATA_BYTES = 65_536
LIMITS = FieldLimits(
    store="Milvus",
    id_bytes=MAX_ID_BYTES,
    name_bytes=MAX_NAME_BYTES,
    text_bytes=MAX_TEXT_BYTES,
    metadata_bytes=MAX_METADATA_BYTES,
)

PROP_DESCRIPTION = "ragrail.description"
PROP_CREATED_AT = "ragrail.created_at"
PROP_SCHEMA = "ragrail.schema_version"
PROP_ANALYZER = "ragrail.analyzer"
SCHEMA_VERSION = "3"  # 3: access-list columns
_OUTPUT_FIELDS = ["id", "document_id", "document_name", "chunk_index", "text", "metadata"]
ACCESS_COLUMNS = MirroredList(
    listed="access_listed", slots=tuple(f"access_{i}" for i in range(MAX_ACCESS_GROUPS))
)
# The list-valued metadata keys a new collection mirrors into columns.
MIRRORED: dict[str, MirroredList] = {ACCESS_GROUPS: ACCESS_COLUMNS}
# Bytes per group; a gateway group name is at most 128 characters.
MAX_GROUP_BYTES = 512
_PREFIX_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def check_options(uri: str, timeout_s: float, index_type: str, prefix: str) -> None:
    if not uri:
        raise InvalidArgument(
            "the Milvus uri is empty; set RAGRAIL_RETRIEVER_MILVUS_URI to a path ending in "
            ".db (Milvus Lite) or to http://host:19530"
        )
    if not timeout_s > 0:
        raise InvalidArgument(f"the Milvus timeout must be positive, got {timeout_s}")
    check_choice("Milvus index type", index_type, INDEX_BUILD_PARAMS)
    if prefix and not _PREFIX_RE.fullmatch(prefix):
        raise InvalidArgument(
            f"collection prefix {prefix!r} is invalid: use letters, digits and '_', "
            "not starting with a digit"
        )


# -- the collection ----------------------------------------------------------------------


def collection_schema(dimension: int) -> Any:
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=MAX_ID_BYTES)
    schema.add_field("document_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
    schema.add_field("document_name", DataType.VARCHAR, max_length=MAX_NAME_BYTES)
    schema.add_field("chunk_index", DataType.INT64)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
    schema.add_field(
        "terms",
        DataType.VARCHAR,
        max_length=MAX_TEXT_BYTES,
        enable_analyzer=True,
        analyzer_params=TERMS_ANALYZER_PARAMS,
    )
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("metadata", DataType.JSON)
    schema.add_field(ACCESS_COLUMNS.listed, DataType.BOOL)
    for slot in ACCESS_COLUMNS.slots:
        schema.add_field(slot, DataType.VARCHAR, max_length=MAX_GROUP_BYTES, nullable=True)
    schema.add_function(
        Function(
            name="text_bm25",
            function_type=FunctionType.BM25,
            input_field_names=["terms"],
            output_field_names=["sparse"],
        )
    )
    return schema


def index_params(client: MilvusClient, index_type: str) -> Any:
    params = client.prepare_index_params()
    params.add_index(
        field_name="vector",
        index_type=index_type,
        metric_type="COSINE",
        params=INDEX_BUILD_PARAMS[index_type],
    )
    params.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    for field in (ACCESS_COLUMNS.listed, *ACCESS_COLUMNS.slots):
        params.add_index(field_name=field, index_type="INVERTED")
    return params


def mirrored_columns(info: dict[str, Any]) -> dict[str, MirroredList]:
    """The list-valued metadata keys that collection `info` mirrors into columns: none for
    a collection made before schema version 3."""
    names = {field.get("name") for field in info.get("fields", [])}
    return {
        key: columns
        for key, columns in MIRRORED.items()
        if columns.listed in names and set(columns.slots) <= names
    }


def search_params(index_type: str, k: int) -> dict[str, Any]:
    if index_type == "HNSW":
        return {"ef": max(k, 64)}  # ef below k would return fewer than k hits
    if index_type == "IVF_FLAT":
        return {"nprobe": 16}
    return {}


def dimension_of(info: dict[str, Any]) -> int | None:
    """The dense vector's dimension in describe_collection's `info`; None when the
    collection has no such field (not one of ours)."""
    for field in info.get("fields", []):
        if field.get("name") == "vector" and "dim" in field.get("params", {}):
            return int(field["params"]["dim"])
    return None


def collection_record(name: str, info: dict[str, Any]) -> CollectionRecord | None:
    dimension = dimension_of(info)
    if dimension is None:
        return None
    props = info.get("properties") or {}
    try:
        created_at = float(props.get(PROP_CREATED_AT, 0.0))
    except ValueError:
        created_at = 0.0
    return CollectionRecord(name, dimension, props.get(PROP_DESCRIPTION, ""), created_at)


# -- chunks as rows ----------------------------------------------------------------------


def output_fields(include_vectors: bool) -> list[str]:
    return [*_OUTPUT_FIELDS, "vector"] if include_vectors else list(_OUTPUT_FIELDS)


def chunk_of(hit: Any) -> ChunkRecord:
    entity = hit["entity"]
    vector = entity.get("vector")
    return ChunkRecord(
        id=str(hit["id"]),
        document_id=entity.get("document_id", ""),
        text=entity.get("text", ""),
        vector=[float(x) for x in vector] if vector is not None else [],
        metadata=dict(entity.get("metadata") or {}),
        document_name=entity.get("document_name") or "",
        chunk_index=int(entity.get("chunk_index") or 0),
    )


def rows_of(
    chunks: list[ChunkRecord],
    dimension: int,
    name: str,
    analyzer: LexicalAnalyzer,
    mirrored: dict[str, MirroredList],
) -> list[dict[str, Any]]:
    """`mirrored`: the collection's `mirrored_columns`."""
    # Milvus servers reject a batch that repeats a primary key; the last copy wins here,
    # as it would with two upserts in a row.
    by_id = {chunk.id: _row(chunk, dimension, name, analyzer, mirrored) for chunk in chunks}
    return list(by_id.values())


def _mirror(where: str, value: Any, columns: MirroredList) -> dict[str, Any]:
    """The columns of one list-valued metadata value (check_chunk bounded its length)."""
    members = [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    for member in members:
        if len(member.encode("utf-8")) > MAX_GROUP_BYTES:
            raise InvalidArgument(
                f"{where}: a group in metadata.{ACCESS_GROUPS} is longer than "
                f"{MAX_GROUP_BYTES} bytes; shorten it"
            )
    row: dict[str, Any] = {columns.listed: value is not None}
    for i, slot in enumerate(columns.slots):
        row[slot] = members[i] if i < len(members) else None
    return row


def _row(
    chunk: ChunkRecord,
    dimension: int,
    name: str,
    analyzer: LexicalAnalyzer,
    mirrored: dict[str, MirroredList],
) -> dict[str, Any]:
    checked = check_chunk(chunk, dimension, name, LIMITS)
    columns: dict[str, Any] = {}
    for key, mirror in mirrored.items():
        columns.update(_mirror(checked.where, chunk.metadata.get(key), mirror))
    return {
        "id": chunk.id,
        "document_id": chunk.document_id,
        "document_name": chunk.document_name,
        "chunk_index": int(chunk.chunk_index),
        "text": chunk.text,
        # Never longer than the text: stems are no longer than words, stop words are dropped.
        "terms": analyzer.index_text(chunk.text),
        "vector": checked.vector,
        "metadata": chunk.metadata,  # a JSON field: Milvus takes the object itself
        **columns,
    }
