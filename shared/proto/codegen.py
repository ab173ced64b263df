"""Regenerates the Python stubs of the gRPC contract from shared/proto/ragrail/v1/*.proto.

protoc names generated imports after the proto path (`from ragrail.v1 import common_pb2`);
the stubs live inside the `shared.proto` package, so those imports are rewritten to
`from shared.proto.ragrail.v1 import ...`. The `.proto` files keep their short import paths
so other languages can generate from `shared/proto` unchanged.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
PACKAGE_DIR = PROTO_ROOT / "ragrail" / "v1"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
_IMPORT = re.compile(r"^from ragrail\.v1 import", re.MULTILINE)


def generate(out_root: Path) -> list[Path]:
    """Writes the stubs for every .proto under out_root/ragrail/v1 and returns their paths."""
    from grpc_tools import protoc  # dev extra: only needed to regenerate

    protos = sorted(PACKAGE_DIR.glob("*.proto"))
    include = Path(protoc.__file__).resolve().parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *(str(p.relative_to(PROTO_ROOT)) for p in protos),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed; see the messages above")
    written = sorted(
        p for p in (out_root / "ragrail" / "v1").iterdir() if p.name.endswith(GENERATED_SUFFIXES)
    )
    for path in written:
        path.write_text(_IMPORT.sub("from shared.proto.ragrail.v1 import", path.read_text()))
    return written


def stale_stubs() -> list[str]:
    """Names of committed stubs that differ from freshly generated ones (empty when in sync)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.name: p.read_text() for p in generate(Path(tmp))}
    committed = {
        p.name: p.read_text() for p in PACKAGE_DIR.iterdir() if p.name.endswith(GENERATED_SUFFIXES)
    }
    names = set(fresh) | set(committed)
    return sorted(n for n in names if fresh.get(n) != committed.get(n))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if committed stubs are stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_stubs()
        if stale:
            print("stale stubs: " + ", ".join(stale) + "; run: python -m shared.proto.codegen")
            return 1
        print("stubs up to date")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in generate(Path(tmp)):
            shutil.copy(path, PACKAGE_DIR / path.name)
            print(f"wrote {PACKAGE_DIR / path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
