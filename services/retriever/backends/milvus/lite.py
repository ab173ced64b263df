"""Milvus Lite servers, shared by the stores of this process.

Milvus Lite 3 is a pure-Python engine that serves the Milvus gRPC protocol from a thread of
this process; its `.db` path is a directory (parquet segments, a WAL, a LOCK file), and only
one process can open it. `MilvusClient.close()` does not let go of it, so a store's close
stops the in-process server once no other store of this process uses the path.
"""

from __future__ import annotations

import threading
from pathlib import Path

from shared.errors import Unavailable

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
