"""python -m trainers.quantize embedder|reranker: ONNX export and INT8 quantization (see
embedder.py and reranker.py)."""

from __future__ import annotations

import argparse
import sys

TARGETS = {"embedder": "trainers.quantize.embedder", "reranker": "trainers.quantize.reranker"}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in TARGETS:
        parser = argparse.ArgumentParser(
            prog="python -m trainers.quantize",
            description="Export a model to ONNX and quantize it to INT8 with onnxruntime.",
        )
        parser.add_argument("target", choices=sorted(TARGETS))
        parser.parse_args(argv[:1])  # prints usage and exits
        return 2
    import importlib

    return int(importlib.import_module(TARGETS[argv[0]]).main(argv[1:]))


if __name__ == "__main__":
    raise SystemExit(main())
