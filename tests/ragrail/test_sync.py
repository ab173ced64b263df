"""`ragrail sync` against the running suite: add, update, delete, a bad file, and a kill -9 in
the middle of a run that the next run finishes."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragrail.client import GatewayClient, GatewayError
from ragrail.sync import CONTENT_HASH, SYNC_ROOT, LocalFile, folder_key, plan, remote_documents

pytestmark = pytest.mark.integration
RAGRAIL = [sys.executable, "-m", "ragrail.cli"]
TOPICS = ["bees", "tides", "glaciers", "volcanoes", "lichens", "comets", "coral", "dunes"]


def _write(folder: Path, i: int, version: int = 1) -> None:
    path = folder / ("notes" if i % 3 else "") / f"doc-{i:03d}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    topic = TOPICS[i % len(TOPICS)]
    fact = f"Version {version}: fact {i * 7 + version} about {topic}."
    path.write_text(f"# Note {i} on {topic}\n\n{fact}\n")


def _sync(folder: Path, collection: str, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RAGRAIL, "sync", str(folder), "-c", collection, "--gateway", url],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def _local(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }


def _mirrors(client: GatewayClient, collection: str, folder: Path) -> None:
    """The collection holds exactly the folder's files, each once, at its current content."""
    remote = remote_documents(client, collection)
    assert {k: v.get(CONTENT_HASH) for k, v in remote.items()} == _local(folder)
    listed = client.list_documents(collection)
    assert listed["total"] == len(_local(folder))
    assert all(d["chunks"] == 1 for d in listed["documents"])  # short notes: no duplicate chunks


def test_sync_adds_updates_deletes_and_survives_a_kill(suite, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder, collection = tmp_path / "docs", "sync_test"
    url = suite.gateway_url
    client = GatewayClient(url)
    for i in range(40):
        _write(folder, i)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7 this is not a pdf")

    first = _sync(folder, collection, url)
    assert first.returncode == 1, first.stdout + first.stderr  # the broken file fails the run
    assert "added 40, updated 0, deleted 0, unchanged 0, failed 1" in first.stdout, first.stdout
    assert "broken.pdf" in first.stdout
    (folder / "broken.pdf").unlink()
    _mirrors(client, collection, folder)

    # A document put there by other means is the user's: sync never deletes it.
    client.ingest_texts(
        collection, [{"id": "manual-note", "name": "manual-note.md", "text": "Kept by hand."}]
    )
    kept = remote_documents(client, collection)["manual-note"]
    assert SYNC_ROOT not in kept and kept[CONTENT_HASH]

    # Many edits, some deletions and additions; the run is killed once part of it is done.
    for i in range(40):
        _write(folder, i, version=2)
    for i in (3, 4, 5):
        next(folder.rglob(f"doc-{i:03d}.md")).unlink()
    for i in range(40, 100):
        _write(folder, i)
    before = remote_documents(client, collection)
    proc = subprocess.Popen(
        [*RAGRAIL, "sync", str(folder), "-c", collection, "--gateway", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        now = remote_documents(client, collection)
        if len(now) > len(before):  # a first batch of new files is in
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = remote_documents(client, collection)
    assert len(partial) < 98, "the run ended before the kill: nothing was tested"

    again = _sync(folder, collection, url)
    assert again.returncode == 0, again.stdout + again.stderr
    remote = remote_documents(client, collection)
    assert remote.pop("manual-note") == kept
    client.delete_document(collection, "manual-note")
    _mirrors(client, collection, folder)
    assert all(meta[SYNC_ROOT] == folder_key(folder) for meta in remote.values())

    # Nothing changed: nothing to do.
    idle = _sync(folder, collection, url)
    assert "added 0, updated 0, deleted 0, unchanged 97, failed 0" in idle.stdout, idle.stdout


def test_plan_compares_hashes_and_deletes_only_its_own_documents(tmp_path: Path) -> None:
    root = folder_key(tmp_path)
    local = {
        "same.md": LocalFile("same.md", tmp_path / "same.md", "h1"),
        "edited.md": LocalFile("edited.md", tmp_path / "edited.md", "h2-new"),
        "new.md": LocalFile("new.md", tmp_path / "new.md", "h3"),
        "adopted.md": LocalFile("adopted.md", tmp_path / "adopted.md", "h4"),
    }
    remote = {
        "same.md": {CONTENT_HASH: "h1", SYNC_ROOT: root},
        "edited.md": {CONTENT_HASH: "h2-old", SYNC_ROOT: root},
        "adopted.md": {CONTENT_HASH: "h4"},  # ingested by hand: the folder takes it over
        "gone.md": {CONTENT_HASH: "h5", SYNC_ROOT: root},
        "other-folder.md": {CONTENT_HASH: "h6", SYNC_ROOT: "/elsewhere"},
        "by-hand.md": {CONTENT_HASH: "h7"},
    }
    todo = plan(local, remote, root)
    assert [f.name for f in todo.add] == ["new.md"]
    assert sorted(f.name for f in todo.update) == ["adopted.md", "edited.md"]
    assert todo.delete == ["gone.md"]
    assert todo.unchanged == 1


def test_sync_watch_follows_the_folder_until_ctrl_c(suite, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder, collection = tmp_path / "watched", "sync_watch"
    client = GatewayClient(suite.gateway_url)
    _write(folder, 0)
    proc = subprocess.Popen(
        [*RAGRAIL, "sync", str(folder), "-c", collection, "--gateway", suite.gateway_url,
         "--watch", "--interval", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip

    def documents() -> dict[str, dict]:
        try:
            return remote_documents(client, collection)
        except GatewayError as exc:  # not created yet by the first pass
            assert exc.status == 404, exc
            return {}

    def until(check, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + 60
        while not check(documents()):
            assert time.monotonic() < deadline, what
            time.sleep(0.2)

    try:
        until(lambda docs: set(docs) == {"doc-000.md"}, "the first file was not synced")
        _write(folder, 1)
        until(lambda docs: set(docs) == {"doc-000.md", "notes/doc-001.md"}, "no new file")
        (folder / "doc-000.md").unlink()
        until(lambda docs: set(docs) == {"notes/doc-001.md"}, "the removed file stayed")
    finally:
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, output
    assert "deleted 1" in output, output
