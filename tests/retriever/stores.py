"""Helpers for the retriever backend tests: chunks, the six-chunk collection, opening a store
of either backend, a child process, the thread hammer. Fixtures built on them are in
conftest.py; the contract every backend meets is test_backend_contract.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from services.retriever.backends.base import ChunkRecord, ScoredChunk, VectorStore
from services.retriever.filters import parse_filter

REPO = Path(__file__).resolve().parents[2]
DIM = 4
BACKEND_NAMES = ["milvus", "faiss"]
NEEDS = {"milvus": ["pymilvus", "milvus_lite"], "faiss": ["faiss", "bm25s"]}


def unit(*xs: float) -> list[float]:
    norm = math.sqrt(sum(x * x for x in xs))
    return [x / norm for x in xs]


def make_chunk(
    doc: str,
    index: int,
    text: str = "",
    vector: list[float] | None = None,
    metadata: dict[str, Any] | None = None,
    chunk_id: str | None = None,
) -> ChunkRecord:
    return ChunkRecord(
        id=f"{doc}:{index}" if chunk_id is None else chunk_id,
        document_id=doc,
        text=text or f"chunk {index} of {doc}",
        vector=vector if vector is not None else unit(1, index + 1, 0.5, 0.25),
        metadata=metadata if metadata is not None else {"n": index},
        document_name=f"{doc}.pdf",
        chunk_index=index,
    )


def six_chunks() -> list[ChunkRecord]:
    """Three documents of 2, 3 and 1 chunks."""
    return [
        make_chunk("a", 0, "Graphene conducts electricity", unit(1, 0, 0, 0),
                   {"year": 2019, "tag": "physics"}),
        make_chunk("a", 1, "graphene sheets are strong", unit(1, 1, 0, 0),
                   {"year": 2019, "tag": "physics"}),
        make_chunk("b", 0, "Protein folding with neural networks", unit(0, 1, 0, 0),
                   {"year": 2021, "tag": "biology", "open": True}),
        make_chunk("b", 1, "neural networks predict structures", unit(0, 1, 1, 0),
                   {"year": 2021, "tag": "biology"}),
        make_chunk("b", 2, "the folding problem", unit(0, 0, 1, 0),
                   {"year": 2022, "tag": "ml"}),
        make_chunk("c", 0, "Quantum error correction codes", unit(0, 0, 0, 1),
                   {"year": 2023.5, "tag": "physics"}),
    ]  # fmt: skip


def ids(hits: list[ScoredChunk]) -> list[str]:
    return [h.chunk.id for h in hits]


def run_in_new_process(code: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def open_store(backend: str, location: str, **options: Any) -> VectorStore:
    """A store of `backend` on `location` (Milvus Lite file or FAISS directory)."""
    if backend == "milvus":
        from services.retriever.backends.milvus import MilvusStore

        return MilvusStore(uri=location, **options)
    from services.retriever.backends.faiss import FaissStore

    return FaissStore(location, **options)


def concurrent_writes_and_searches(s: VectorStore) -> None:
    """Three writer and three searcher threads on the six chunks of 'docs'; then checks that
    nothing failed and every write landed."""
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for batch in range(5):
                doc = f"w{worker}_{batch}"
                s.upsert("docs", [make_chunk(doc, i, f"worker text {i}") for i in range(4)])
                s.delete_stale_chunks("docs", [doc], [f"{doc}:0", f"{doc}:1", f"{doc}:2"])
        except BaseException as exc:  # collected: a thread's exception would vanish
            errors.append(exc)

    def search() -> None:
        try:
            for _ in range(10):
                s.dense_search("docs", unit(1, 1, 1, 1), 5, parse_filter({"n": {"$gte": 1}}))
                s.sparse_search("docs", "worker text", 5, None)
                s.count("docs")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    threads += [threading.Thread(target=search) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert s.count("docs") == (6 + 3 * 5 * 3, 3 + 3 * 5)
    assert len(s.dense_search("docs", unit(1, 1, 1, 1), 100, None)) == 6 + 3 * 5 * 3
