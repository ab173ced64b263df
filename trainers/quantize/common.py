"""What the quantize commands (embedder.py, reranker.py) share, with the trainers that
quantize the same way: the command line's head and its --variant option, the exit status of
the INT8 check, and the model card's ONNX line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from shared.models.quantize import DEFAULT_VARIANT, ONNX_OPSET, VARIANTS


def quantize_parser(target: str, description: str) -> argparse.ArgumentParser:
    """The command line of `python -m trainers.quantize <target>`."""
    return argparse.ArgumentParser(
        prog=f"python -m trainers.quantize {target}", description=description
    )


def add_variant_argument(
    parser: argparse.ArgumentParser,
    choices: tuple[str, ...] = tuple(VARIANTS),
    help: str = "Dynamic quantization variant, as the embedder's (default: %(default)s).",
) -> None:
    """--variant: which dynamic quantization (shared/models/quantize.py VARIANTS)."""
    parser.add_argument("--variant", choices=choices, default=DEFAULT_VARIANT, help=help)


def exit_status(failed: bool, why: str) -> int:
    """A quantize command's exit status: 1, saying `why` on stderr, when the INT8 model
    failed its check; else 0."""
    if failed:
        print(f"INT8 fails its check: {why}", file=sys.stderr)
        return 1
    return 0


def onnx_line(manifest: dict[str, Any], output: str) -> str:
    """The model card's ONNX row: opset, the export's inputs and its `output`."""
    return f"opset {ONNX_OPSET}, inputs {', '.join(manifest['onnx']['inputs'])}, output {output}"
