"""Index files: a collection's dense index on disk, a cache of the vectors in its table.

A file is written to a temporary name in the collection's folder, fsynced and `os.replace`d
into place, so no reader ever sees half a file. It carries the write generation it reflects,
in its name (`index-<kind>-g<N>.faiss`) and in a header, and a SHA-256 trailer, so a file of
another generation (a crash between a commit and the index write) or a damaged one is
refused and the index rebuilt. A generation number rather than file times: mtimes are coarse,
survive copies badly and can go backwards with the clock.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import struct
import uuid
from pathlib import Path
from typing import Any

import faiss

_INDEX_MAGIC = b"ragrail-faiss-index\x00v1\x00"
_INDEX_FILE_RE = re.compile(r"index-(?P<kind>[a-z0-9]+)-g(?P<gen>\d+)\.faiss")


def index_path(folder: Path, kind: str, generation: int) -> Path:
    return folder / f"index-{kind}-g{generation}.faiss"


def save_index(final: Path, index: Any, generation: int) -> None:
    """Writes `index` atomically as `final`, then removes older generations and temporary
    files a crash left behind."""
    folder = final.parent
    tmp = folder / f".{final.name}.{uuid.uuid4().hex}.tmp"
    try:
        write_index_file(tmp, index, generation)
        os.replace(tmp, final)  # atomic: readers see the old file or the whole new one
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(folder)
    for entry in folder.iterdir():  # older generations and abandoned temp files
        if entry.name != final.name and (
            _INDEX_FILE_RE.fullmatch(entry.name) or entry.name.endswith(".tmp")
        ):
            with contextlib.suppress(OSError):
                entry.unlink()


def write_index_file(path: Path, index: Any, generation: int) -> None:
    """FAISS's serialisation framed by a header naming the write generation and a SHA-256
    trailer, then fsynced. The frame lets a reader reject a file from another generation
    (say, copied or renamed over) and one damaged in a way faiss would still parse, such as
    flipped bits in the vectors."""
    digest = hashlib.sha256()

    def write(data: bytes) -> None:
        digest.update(data)
        f.write(data)

    with open(path, "wb") as f:
        write(_INDEX_MAGIC + struct.pack("<Q", generation))
        writer = faiss.PyCallbackIOWriter(write)
        faiss.write_index(index, writer)
        del writer
        f.write(digest.digest())
        f.flush()
        os.fsync(f.fileno())


def read_index_file(path: Path, generation: int) -> Any:
    """The index in a file `write_index_file` wrote; ValueError if it is not that file
    whole, or is of another generation."""
    digest = hashlib.sha256()

    def read(n: int) -> bytes:
        data = f.read(n)
        digest.update(data)
        return data

    with open(path, "rb") as f:
        header = read(len(_INDEX_MAGIC) + 8)
        if not header.startswith(_INDEX_MAGIC) or len(header) != len(_INDEX_MAGIC) + 8:
            raise ValueError("not a ragrail index file")
        (written,) = struct.unpack("<Q", header[len(_INDEX_MAGIC) :])
        if written != generation:
            raise ValueError(f"it holds generation {written}, the database is at {generation}")
        index = faiss.read_index(faiss.PyCallbackIOReader(read))
        trailer = f.read(digest.digest_size + 1)
    if trailer != digest.digest():
        raise ValueError("its checksum does not match: the file is truncated or damaged")
    return index


def fsync_dir(path: Path) -> None:
    """Makes a rename in `path` durable (POSIX: the rename lives in the directory)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
