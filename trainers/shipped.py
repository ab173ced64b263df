"""Training data that ships in the repository (trainers/<model>/training_data/): models trained
on first start, on a machine without ../shared/data, learn from these files.

Each recipe's `build_data` module turns ../shared/data into {relative path: (bytes, stats)};
`write_or_check` writes them, or (`--check`) says which shipped files are out of date. gzip
with a fixed mtime and no file name: the same rows give the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def opener(path: Path) -> Any:
    """`open` for a plain file, `gzip.open` for a .gz one (both in text mode)."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def read_rows(path: Path) -> list[dict]:
    """JSON lines from `path` (.jsonl or .jsonl.gz)."""
    with opener(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def gzip_text(text: str) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9, mtime=0, filename="") as f:
        f.write(text.encode("utf-8"))
    return buffer.getvalue()


def gzip_rows(rows: list[dict]) -> bytes:
    return gzip_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def write_or_check(files: dict[str, tuple[bytes, dict]], out: Path, check: bool) -> int:
    """Writes each file under `out` (printing its stats), or with `check` writes nothing and
    returns 1 when a shipped file differs from what the data gives now."""
    stale = []
    for rel, (data, stats) in files.items():
        target = out / rel
        if check:
            if not target.is_file() or target.read_bytes() != data:
                stale.append(rel)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()[:16]
        described = ", ".join(f"{k} {v}" for k, v in stats.items())
        print(f"{target}: {described}, {len(data) / 1024:.0f} KiB, sha256 {digest}…")
    if stale:
        print(f"out of date: {', '.join(stale)}")
        return 1
    return 0


def main(
    prog: str,
    doc: str,
    build: Callable[[Path], dict[str, tuple[bytes, dict]]],
    source: Path,
    out: Path,
    argv: list[str] | None = None,
) -> int:
    """A recipe's `python -m trainers.<model>.build_data [--source] [--out] [--check]`."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=source)
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--check", action="store_true", help="Compare, write nothing.")
    args = parser.parse_args(argv)
    return write_or_check(build(args.source), args.out, args.check)
