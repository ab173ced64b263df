"""`ragrail sync DIR -c NAME`: a collection that mirrors a folder.

Each run compares the folder with the collection and makes them equal: new files are
ingested, changed ones (their SHA-256 differs from the `content_sha256` the gateway recorded
at ingest) ingested again, which replaces their chunks, and the documents of files that are
gone are deleted. Nothing is kept between runs but the collection itself, so a run that was
killed half-way is finished by the next one: a document's chunks are replaced in one upsert,
and its hash is stored with them, so a document is either the old file or the new one.

Only documents that sync put there (metadata `sync_root`, the folder's absolute path) are
ever deleted; a document ingested otherwise under the same name is replaced by the file and
becomes the folder's.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ragrail.client import GatewayClient, GatewayError, batches, find_documents
from shared.formats import CONTENT_HASH

SYNC_ROOT = "sync_root"
PAGE = 1000


@dataclass(frozen=True)
class LocalFile:
    name: str  # the document id: the path relative to the folder
    path: Path
    sha256: str


@dataclass
class SyncPlan:
    add: list[LocalFile] = field(default_factory=list)
    update: list[LocalFile] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    unchanged: int = 0

    @property
    def steps(self) -> int:
        return len(self.add) + len(self.update) + len(self.delete)


@dataclass
class SyncReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (document, why)
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"added {len(self.added)}, updated {len(self.updated)}, deleted "
            f"{len(self.deleted)}, unchanged {self.unchanged}, failed {len(self.failed)} "
            f"in {self.seconds:.1f} s"
        )


class FileHashes:
    """SHA-256 of files, recomputed only when a file's size or modification time changed
    (`--watch` looks at the folder every few seconds)."""

    def __init__(self) -> None:
        self._known: dict[Path, tuple[int, int, str]] = {}

    def of(self, path: Path) -> str:
        stat = path.stat()
        known = self._known.get(path)
        if known is not None and known[:2] == (stat.st_mtime_ns, stat.st_size):
            return known[2]
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        self._known[path] = (stat.st_mtime_ns, stat.st_size, digest.hexdigest())
        return digest.hexdigest()


def folder_key(folder: Path) -> str:
    return str(folder.expanduser().resolve())


def local_files(folder: Path, hashes: FileHashes) -> dict[str, LocalFile]:
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a directory")
    files: dict[str, LocalFile] = {}
    for name, path in find_documents([folder]):
        try:
            files[name] = LocalFile(name, path, hashes.of(path))
        except FileNotFoundError:
            continue  # removed while the folder was read: the next run sees it gone
    return files


def remote_documents(client: GatewayClient, collection: str) -> dict[str, dict]:
    """Every document of the collection: id -> its metadata."""
    found: dict[str, dict] = {}
    offset = 0
    while True:
        page = client.list_documents(collection, limit=PAGE, offset=offset)
        for doc in page["documents"]:
            found[doc["id"]] = doc.get("metadata") or {}
        offset += len(page["documents"])
        if not page["documents"] or offset >= page["total"]:
            return found


def plan(local: dict[str, LocalFile], remote: dict[str, dict], root: str) -> SyncPlan:
    out = SyncPlan()
    for name, file in local.items():
        meta = remote.get(name)
        if meta is None:
            out.add.append(file)
        elif meta.get(CONTENT_HASH) != file.sha256 or meta.get(SYNC_ROOT) != root:
            out.update.append(file)
        else:
            out.unchanged += 1
    out.delete = sorted(
        name for name, meta in remote.items() if name not in local and meta.get(SYNC_ROOT) == root
    )
    return out


Progress = Callable[[int], None]


def apply(
    client: GatewayClient,
    collection: str,
    todo: SyncPlan,
    root: str,
    advance: Progress = lambda n: None,
) -> SyncReport:
    """Carries the plan out: deletions first, then uploads in batches. A batch the gateway
    refuses is sent again file by file, so one bad file fails alone, with the reason."""
    report = SyncReport(unchanged=todo.unchanged)
    for name in todo.delete:
        try:
            client.delete_document(collection, name)
            report.deleted.append(name)
        except GatewayError as exc:
            report.failed.append((name, exc.message))
        advance(1)
    updated = {f.name for f in todo.update}
    files = [(f.name, f.path) for f in (*todo.add, *todo.update)]
    metadata = {SYNC_ROOT: root}
    for batch in batches(files):
        for done, error in _upload(client, collection, batch, metadata):
            name = done[0]
            if error is not None:
                report.failed.append((name, error))
            else:
                (report.updated if name in updated else report.added).append(name)
        advance(len(batch))
    return report


def _upload(
    client: GatewayClient, collection: str, batch: list[tuple[str, Path]], metadata: dict
) -> list[tuple[tuple[str, Path], str | None]]:
    try:
        client.ingest_files(collection, batch, metadata=metadata)
        return [(item, None) for item in batch]
    except (GatewayError, OSError) as exc:
        if len(batch) == 1:
            return [(batch[0], exc.message if isinstance(exc, GatewayError) else str(exc))]
    return [r for item in batch for r in _upload(client, collection, [item], metadata)]


def sync_once(
    client: GatewayClient,
    folder: Path,
    collection: str,
    hashes: FileHashes,
    on_plan: Callable[[SyncPlan], Progress] = lambda p: lambda n: None,
) -> SyncReport:
    started = time.monotonic()
    root = folder_key(folder)
    client.ensure_collection(collection)
    todo = plan(local_files(folder, hashes), remote_documents(client, collection), root)
    report = apply(client, collection, todo, root, on_plan(todo))
    report.seconds = time.monotonic() - started
    return report
