"""`ragrail sync` on a folder of many files: a first sync against `ragrail ingest` of the same
folder (the baseline, same run), then edits, deletions and a kill -9 in the middle of a sync,
then the run that finishes it, checked file by file against the collection.

    python bench/sync.py                      # 500 files, 50 edits, 20 deletions
    python bench/sync.py --files 200 --edits 20 --deletions 10

Files are SciFact abstracts from ../shared/data (generated notes where that is absent).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import SHARED_DATA, running_suite
from ragrail.client import GatewayClient
from ragrail.sync import CONTENT_HASH, remote_documents

RAGRAIL = [sys.executable, "-m", "ragrail.cli"]
console = Console()


def texts(n: int) -> list[tuple[str, str]]:
    corpus = SHARED_DATA / "scifact" / "corpus.jsonl"
    if corpus.is_file():
        out = []
        with corpus.open() as f:
            for line in f:
                row = json.loads(line)
                out.append((f"{row['_id']}", f"# {row['title']}\n\n{row['text']}\n"))
                if len(out) == n:
                    return out
    return [(f"note-{i}", f"# Note {i}\n\nFact number {i} is about {i % 17}.\n") for i in range(n)]


def write_folder(folder: Path, n: int) -> list[Path]:
    paths = []
    for i, (name, text) in enumerate(texts(n)):
        path = folder / f"part-{i % 10}" / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(path)
    return paths


def run(args: list[str]) -> float:
    started = time.perf_counter()
    env = {**os.environ, "COLUMNS": "200"}  # one summary line
    done = subprocess.run([*RAGRAIL, *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"ragrail {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    console.print(f"  ragrail {args[0]}: {done.stdout.strip().splitlines()[-1]}")
    return time.perf_counter() - started


def mirrors(client: GatewayClient, collection: str, folder: Path) -> tuple[bool, int]:
    local = {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*.md")
    }
    remote = {k: v.get(CONTENT_HASH) for k, v in remote_documents(client, collection).items()}
    return remote == local, len(remote)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--deletions", type=int, default=20)
    args = parser.parse_args()
    rows: list[tuple[str, str]] = []
    with running_suite() as url, tempfile.TemporaryDirectory() as tmp:
        os.environ["RAGRAIL_GATEWAY_URL"] = url
        client = GatewayClient(url)
        folder = Path(tmp) / "folder"
        paths = write_folder(folder, args.files)
        console.print(f"{len(paths)} files, {sum(p.stat().st_size for p in paths) / 1e6:.1f} MB")

        ingest_s = run(["ingest", str(folder), "-c", "baseline"])
        sync_s = run(["sync", str(folder), "-c", "synced"])
        rows.append(("first sync / `ragrail ingest` (baseline)", f"{sync_s:.1f} / {ingest_s:.1f} s"
                     f" = {sync_s / ingest_s:.2f}x"))  # fmt: skip
        idle_s = run(["sync", str(folder), "-c", "synced"])
        rows.append(("sync with nothing changed", f"{idle_s:.1f} s"))

        for path in paths[: args.edits]:
            path.write_text(path.read_text() + "\nEdited: one more sentence.\n")
        for path in paths[-args.deletions :]:
            path.unlink()
        before = {k: v.get(CONTENT_HASH) for k, v in remote_documents(client, "synced").items()}
        proc = subprocess.Popen([*RAGRAIL, "sync", str(folder), "-c", "synced"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        while proc.poll() is None:  # kill once a first edited document is in
            now = {k: v.get(CONTENT_HASH) for k, v in remote_documents(client, "synced").items()}
            if any(now.get(k) != h for k, h in before.items() if k in now):
                break
            time.sleep(0.05)
        killed = proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        ok_partial, _ = mirrors(client, "synced", folder)
        rows.append(("killed mid-run (kill -9)", f"{killed}; mirrors then: {ok_partial}"))
        finish_s = run(["sync", str(folder), "-c", "synced"])
        ok, count = mirrors(client, "synced", folder)
        expected = args.files - args.deletions
        rows.append(("re-run after the kill", f"{finish_s:.1f} s"))
        rows.append(("collection == folder (ids and SHA-256)", f"{ok}: {count} of {expected}"))
    table = Table(title=f"ragrail sync: {args.files} files, {args.edits} edits, "
                  f"{args.deletions} deletions")  # fmt: skip
    table.add_column("step")
    table.add_column("result")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
