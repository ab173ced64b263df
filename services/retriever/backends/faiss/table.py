"""A collection's `chunks.sqlite`, the FAISS backend's source of truth.

One file per collection holds its info (dimension, analysis, write generation, next FAISS id)
and every chunk: text, analysed BM25 terms, metadata and the normalised vector, so any index
can be rebuilt from it. Each write is one transaction (WAL, synchronous=FULL) that also bumps
the write generation, so an acknowledged write survives a crash and a half-done one is
rolled back.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from services.retriever.analysis import LexicalAnalyzer
from services.retriever.backends.base import ChunkRecord, CollectionRecord, DocumentRecord
from services.retriever.backends.validation import check_chunk
from shared.errors import FailedPrecondition, InvalidArgument

DB_FILE = "chunks.sqlite"
SCHEMA_VERSION = "1"
SQL_BATCH = 500  # parameters per `IN (...)`; far below SQLite's limit

_SCHEMA = (
    "CREATE TABLE info (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # fid is the FAISS id. Vectors are kept here too, so any index type can be rebuilt.
    "CREATE TABLE chunks ("
    " fid INTEGER PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE,"
    " document_id TEXT NOT NULL,"
    " document_name TEXT NOT NULL,"
    " chunk_index INTEGER NOT NULL,"
    " text TEXT NOT NULL,"
    " terms TEXT NOT NULL,"
    " metadata TEXT NOT NULL,"
    " vector BLOB NOT NULL)",
    "CREATE INDEX chunks_by_document ON chunks (document_id, chunk_index)",
)
_UPSERT = (
    "INSERT INTO chunks (id, document_id, document_name, chunk_index, text, "
    "terms, metadata, vector, fid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT(fid) DO UPDATE SET id=excluded.id, "
    "document_id=excluded.document_id, document_name=excluded.document_name, "
    "chunk_index=excluded.chunk_index, text=excluded.text, "
    "terms=excluded.terms, metadata=excluded.metadata, vector=excluded.vector"
)
# The name and metadata are those of the document's first chunk. ORDER BY on TEXT compares
# UTF-8 bytes, which orders like Python's str comparison.
_DOCUMENT_PAGE = (
    "SELECT d.document_id, d.n, "
    "(SELECT document_name FROM chunks c WHERE c.document_id = d.document_id "
    " ORDER BY chunk_index, fid LIMIT 1), "
    "(SELECT metadata FROM chunks c WHERE c.document_id = d.document_id "
    " ORDER BY chunk_index, fid LIMIT 1) "
    "FROM (SELECT document_id, COUNT(*) AS n FROM chunks GROUP BY document_id "
    "      ORDER BY document_id LIMIT ? OFFSET ?) d ORDER BY d.document_id"
)


# -- rows to write -----------------------------------------------------------------------


@dataclass
class Row:
    id: str
    document_id: str
    document_name: str
    chunk_index: int
    text: str
    terms: str
    metadata: str  # JSON
    vector: np.ndarray  # float32, L2-normalised

    def columns(self) -> tuple[Any, ...]:
        return (
            self.id,
            self.document_id,
            self.document_name,
            self.chunk_index,
            self.text,
            self.terms,
            self.metadata,
            self.vector.astype("<f4").tobytes(),
        )


def row(chunk: ChunkRecord, dimension: int, name: str, analyzer: LexicalAnalyzer) -> Row:
    checked = check_chunk(chunk, dimension, name)
    vector = unit(checked.vector)
    if not vector.any():
        raise InvalidArgument(
            f"{checked.where}: the vector is all zeros, so it has no direction to compare; "
            "check the embedder"
        )
    return Row(
        id=chunk.id,
        document_id=chunk.document_id,
        document_name=chunk.document_name,
        chunk_index=int(chunk.chunk_index),
        text=chunk.text,
        terms=analyzer.index_text(chunk.text),
        metadata=checked.metadata_json,
        vector=vector,
    )


def unit(values: list[float]) -> np.ndarray:
    """Unit-length float32 copy of finite values (all zeros stay zeros). Normalised here
    although the embedder already normalises: inner product equals cosine only on unit
    vectors."""
    vector = np.asarray(values, dtype=np.float64)
    norm = float(np.linalg.norm(vector))
    if norm > 0:
        vector = vector / norm
    return vector.astype(np.float32)


# -- the table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredCollection:
    """What a collection's info says about it when it is opened."""

    record: CollectionRecord
    analyzer: str  # LexicalAnalyzer.signature of its BM25 terms
    generation: int


class ChunkTable:
    """One collection's SQLite connection. Not locked: the caller holds the collection's
    lock around every call."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    @classmethod
    def open(cls, name: str, path: Path) -> tuple[ChunkTable, StoredCollection]:
        db = sqlite3.connect(path / DB_FILE, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # FULL: a commit that returned survives a power cut, not only a process crash.
            db.execute("PRAGMA synchronous=FULL")
            info = dict(db.execute("SELECT key, value FROM info").fetchall())
            if "dimension" not in info or "generation" not in info:
                raise sqlite3.DatabaseError("the collection info is incomplete (malformed)")
            if info.get("schema_version") != SCHEMA_VERSION:
                raise FailedPrecondition(
                    f"collection '{name}' at {path} has storage version "
                    f"{info.get('schema_version')!r}, this retriever reads {SCHEMA_VERSION!r}; "
                    "re-create the collection and ingest again"
                )
            record = CollectionRecord(
                name=name,
                dimension=int(info["dimension"]),
                description=info.get("description", ""),
                created_at=float(info.get("created_at", "0")),
            )
            stored = StoredCollection(record, info.get("analyzer", ""), int(info["generation"]))
        except BaseException:
            db.close()
            raise
        return cls(db), stored

    def close(self) -> None:
        self.db.close()

    # -- writing -----------------------------------------------------------------------

    def upsert(self, rows: list[Row], fids: list[int], next_fid: int, generation: int) -> None:
        """Writes `rows` under their FAISS ids, the next free id and the new write
        generation, in one transaction."""
        params = [(*r.columns(), fid) for r, fid in zip(rows, fids, strict=True)]
        with transaction(self.db):
            self.db.executemany(_UPSERT, params)
            _set_info(self.db, "next_fid", str(next_fid))
            _set_info(self.db, "generation", str(generation))

    def delete(self, fids: list[int], generation: int) -> None:
        """Deletes the chunks of these FAISS ids and records the new write generation, in
        one transaction."""
        with transaction(self.db):
            for batch in _batches(fids):
                self.db.execute(
                    f"DELETE FROM chunks WHERE fid IN ({_marks(len(batch))})", list(batch)
                )
            _set_info(self.db, "generation", str(generation))

    # -- reading -----------------------------------------------------------------------

    def next_fid(self) -> int:
        return int(_info(self.db, "next_fid"))

    def size(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def counts(self) -> tuple[int, int]:
        """(chunks, documents)."""
        chunks, documents = self.db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT document_id) FROM chunks"
        ).fetchone()
        return int(chunks), int(documents)

    def document_page(self, limit: int, offset: int) -> tuple[list[DocumentRecord], int]:
        total = int(self.db.execute("SELECT COUNT(DISTINCT document_id) FROM chunks").fetchone()[0])
        if limit == 0:
            return [], total
        page = self.db.execute(_DOCUMENT_PAGE, (limit, offset)).fetchall()
        documents = [
            DocumentRecord(id=doc, name=doc_name or "", num_chunks=int(n), metadata=json.loads(md))
            for doc, n, doc_name, md in page
        ]
        return documents, total

    def rows(
        self, fids: Sequence[int], include_vectors: bool, text: bool = True
    ) -> dict[int, ChunkRecord]:
        columns = (
            "fid, id, document_id, document_name, chunk_index, "
            + ("text" if text else "''")
            + ", metadata"
            + (", vector" if include_vectors else "")
        )
        found: dict[int, ChunkRecord] = {}
        for batch in _batches(fids):
            cursor = self.db.execute(
                f"SELECT {columns} FROM chunks WHERE fid IN ({_marks(len(batch))})", list(batch)
            )
            for r in cursor:
                vector = np.frombuffer(r[7], dtype="<f4").tolist() if include_vectors else []
                found[int(r[0])] = ChunkRecord(
                    id=r[1],
                    document_id=r[2],
                    text=r[5],
                    vector=vector,
                    metadata=json.loads(r[6]),
                    document_name=r[3],
                    chunk_index=int(r[4]),
                )
        return found

    def fids_of_ids(self, ids: list[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for batch in _batches(ids):
            cursor = self.db.execute(
                f"SELECT id, fid FROM chunks WHERE id IN ({_marks(len(batch))})", list(batch)
            )
            found.update((cid, int(fid)) for cid, fid in cursor)
        return found

    def chunks_of(self, document_ids: list[str]) -> list[tuple[int, str]]:
        """(fid, chunk id) of every chunk of these documents."""
        found: list[tuple[int, str]] = []
        for batch in _batches(list(dict.fromkeys(document_ids))):
            cursor = self.db.execute(
                f"SELECT fid, id FROM chunks WHERE document_id IN ({_marks(len(batch))})",
                list(batch),
            )
            found.extend((int(fid), cid) for fid, cid in cursor)
        return found

    def vectors(self, dimension: int) -> tuple[np.ndarray, np.ndarray]:
        """(fids, vectors) of every chunk, in fid order."""
        n = self.size()
        fids = np.empty(n, dtype=np.int64)
        vectors = np.empty((n, dimension), dtype=np.float32)
        i = 0
        # Filled row by row: a list of blobs joined at the end would double the peak memory.
        for fid, blob in self.db.execute("SELECT fid, vector FROM chunks ORDER BY fid"):
            if i == n:
                break
            fids[i] = fid
            vectors[i] = np.frombuffer(blob, dtype="<f4")
            i += 1
        return fids[:i], vectors[:i]

    def terms(self) -> tuple[np.ndarray, list[list[str]]]:
        """(fids, analysed terms) of every chunk, in fid order."""
        found = self.db.execute("SELECT fid, terms FROM chunks ORDER BY fid").fetchall()
        fids = np.fromiter((fid for fid, _ in found), dtype=np.int64, count=len(found))
        return fids, [terms.split() for _, terms in found]


# -- SQLite ------------------------------------------------------------------------------


def init_db(path: Path, info: dict[str, str]) -> None:
    """Creates a collection's database with its info."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        with transaction(db):
            for statement in _SCHEMA:
                db.execute(statement)
            db.executemany("INSERT INTO info (key, value) VALUES (?, ?)", list(info.items()))
    finally:
        db.close()


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        # SQLite rolls some failures (a full disk) back by itself; a second ROLLBACK would
        # raise and hide the real error.
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _info(db: sqlite3.Connection, key: str) -> str:
    found = db.execute("SELECT value FROM info WHERE key = ?", (key,)).fetchone()
    if found is None:
        raise sqlite3.DatabaseError(f"collection info lacks '{key}' (malformed)")
    return str(found[0])


def _set_info(db: sqlite3.Connection, key: str, value: str) -> None:
    db.execute(
        "INSERT INTO info (key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _batches(items: Iterable[Any]) -> Iterator[list[Any]]:
    listed = list(items)
    for start in range(0, len(listed), SQL_BATCH):
        yield listed[start : start + SQL_BATCH]


def _marks(n: int) -> str:
    return ", ".join("?" * n)
