"""The FAISS backend's directory: the lock that gives it to one process, and collection
folders that appear and disappear atomically.

    LOCK                                  flock'ed by the one process using the directory
    <collection>/chunks.sqlite            the source of truth (table.py)
    <collection>/index-<kind>-g<N>.faiss  the dense index as of write generation N
    <collection>/.index-*.tmp             only while an index file is being written

Only one process may use a directory: a second store would keep its own in-memory index and
silently diverge.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import uuid
from pathlib import Path

from services.retriever.backends.faiss.index_file import fsync_dir
from services.retriever.backends.faiss.table import init_db
from shared.errors import Unavailable

LOCK_FILE = "LOCK"


def lock_directory(directory: Path) -> int:
    """Creates `directory`, takes its lock (Unavailable while another process holds it) and
    clears what a crash while creating or deleting a collection left; returns the lock's
    file descriptor, whose closing releases it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise Unavailable(
            f"cannot create the FAISS directory {directory}: {exc.strerror or exc}; "
            "choose a writable RAGRAIL_RETRIEVER_FAISS_DIR"
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _read_pid(fd)
        os.close(fd)
        who = f" (process {holder})" if holder else ""
        raise Unavailable(
            f"the FAISS directory {directory} is in use by another retriever{who}; only "
            "one process can use it at a time: stop the other one, or set "
            "RAGRAIL_RETRIEVER_FAISS_DIR to another directory"
        ) from exc
    with contextlib.suppress(OSError):  # the pid only helps the message above
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    for entry in directory.iterdir():
        if entry.name.startswith((".creating-", ".deleting-")):
            shutil.rmtree(entry, ignore_errors=True)
    return fd


def create_folder(path: Path, db_file: str, info: dict[str, str]) -> None:
    """The folder of a new collection with its database. Built under a hidden name and
    renamed: a crash leaves no half-made collection."""
    staging = path.parent / f".creating-{path.name}-{uuid.uuid4().hex}"
    staging.mkdir()
    try:
        init_db(staging / db_file, info)
        os.rename(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(path.parent)


def remove_folder(path: Path) -> None:
    """Renamed first so the collection disappears atomically, then removed."""
    trash = path.parent / f".deleting-{path.name}-{uuid.uuid4().hex}"
    os.rename(path, trash)
    fsync_dir(path.parent)
    shutil.rmtree(trash, ignore_errors=True)


def _read_pid(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        return str(int(os.pread(fd, 32, 0).decode().strip()))
    return ""
