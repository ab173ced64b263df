"""Documents whose id holds a control character (stored before the servicer refused such ids)
still list and delete, on both backends: no Milvus string literal can name them, so the
Milvus backend finds them by a scan (issue 17's stuck collection)."""

from __future__ import annotations

from services.retriever.backends.base import VectorStore
from tests.retriever.stores import DIM, make_chunk

BAD = "bad\x01id.txt"


def test_a_stored_unquotable_id_lists_and_deletes(store: VectorStore) -> None:
    store.create_collection("stuck", DIM, "")
    # Written through the backend, as the servicer of an older version let it through; chunk
    # ids are hex digests, as the gateway makes them.
    chunks = [(BAD, 0), (BAD, 1), ("good", 0), ("tab\there", 0)]
    store.upsert(
        "stuck", [make_chunk(d, i, chunk_id=f"{n:040x}") for n, (d, i) in enumerate(chunks)]
    )
    documents, total = store.list_documents("stuck", 100, 0)
    assert total == 3
    assert {d.id: d.num_chunks for d in documents} == {BAD: 2, "good": 1, "tab\there": 1}
    assert store.delete_documents("stuck", [BAD, "good"]) == 3
    documents, total = store.list_documents("stuck", 100, 0)
    assert [d.id for d in documents] == ["tab\there"] and total == 1
