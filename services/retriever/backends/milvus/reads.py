"""Reading rows from Milvus past a server's cap on one query, and the document ids a Milvus
string literal cannot hold (MilvusStore finds those by a scan)."""

from __future__ import annotations

from typing import Any

from pymilvus import MilvusClient

from services.retriever.filters import quote_string
from shared.errors import InvalidArgument

QUERY_BATCH = 4_096  # rows per query-iterator page


def iterate_rows(
    client: MilvusClient, collection: str, expr: str, fields: list[str], timeout: float | None
) -> list[dict[str, Any]]:
    """Every row matching `expr`: a server caps a plain query at 16,384 rows, and the
    iterator pages past that."""
    rows: list[dict[str, Any]] = []
    iterator = client.query_iterator(
        collection, batch_size=QUERY_BATCH, filter=expr, output_fields=fields, timeout=timeout
    )
    try:
        while batch := iterator.next():
            rows.extend(batch)
    finally:
        iterator.close()
    return rows


def split_quotable(ids: list[str]) -> tuple[list[str], set[str]]:
    """`ids` that can be written as a Milvus string literal (quote_string's rule), in order,
    and the set of those that cannot (a control character, stored before the servicer
    refused such ids)."""
    quotable: list[str] = []
    unquotable: set[str] = set()
    for value in ids:
        try:
            quote_string(value)
        except InvalidArgument:
            unquotable.add(value)
        else:
            quotable.append(value)
    return quotable, unquotable
