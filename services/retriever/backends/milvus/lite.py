"""Milvus Lite servers, shared by the stores of this process.

Milvus Lite 3 is a pure-Python engine that serves the Milvus gRPC protocol from a thread of
this process; its `.db` path is a directory (parquet segments, a WAL, a LOCK file), and only
one process can open it. `MilvusClient.close()` does not let go of it, so a store's close
stops the in-process server once no other store of this process uses the path.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pymilvus.exceptions import MilvusException

from services.retriever.backends.milvus import errors
from shared.errors import Unavailable
from shared.models.remote import retry_wait

log = logging.getLogger(__name__)
# Tries of a Lite load that found a file still being written (0.25, 0.5, 1, 2 s apart).
LOAD_RETRIES = 4
_lite_lock = threading.Lock()
_lite_users: dict[str, int] = {}


def prepare_path(uri: str) -> None:
    """Makes the parent directory of a Lite path; Unavailable where Lite cannot use it."""
    path = Path(uri)
    if path.is_file():
        raise Unavailable(
            f"{uri} is a file, but Milvus Lite 3 keeps its data in a directory of "
            "that name (the file was probably written by Milvus Lite 2, which this "
            "version cannot read); move it away or choose another RAGRAIL_RETRIEVER_MILVUS_URI"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise Unavailable(
            f"cannot create the directory for Milvus Lite data {uri}: {exc}; "
            "choose a writable RAGRAIL_RETRIEVER_MILVUS_URI"
        ) from exc


def acquire(path: str) -> None:
    with _lite_lock:
        _lite_users[path] = _lite_users.get(path, 0) + 1


def release(path: str) -> None:
    # pymilvus runs one Lite server per path per process; stopping it while another store
    # still uses it would break that store, hence the count.
    with _lite_lock:
        users = _lite_users.get(path, 0) - 1
        if users > 0:
            _lite_users[path] = users
            return
        _lite_users.pop(path, None)
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(path)


def load_retrying(load: Callable[[], None], name: str, timeout: float) -> None:
    """`load()`, tried again (within `timeout`) where Lite answers that a file is still being
    written: once, on a loaded 2-core machine, Lite's load of a collection just released
    failed with "File is too small: 0" and the next try would have served."""
    deadline = time.monotonic() + timeout
    attempt = 0
    while True:
        try:
            load()
            return
        except MilvusException as exc:
            wait = (
                retry_wait(attempt, LOAD_RETRIES, 0.25, deadline)
                if errors.is_file_being_written(exc)
                else None
            )
            if wait is None:
                raise
            log.warning("Milvus Lite could not load '%s' yet (%s); trying again", name, exc)
            attempt += 1
            time.sleep(wait)
