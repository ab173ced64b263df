"""ONNX export and INT8 quantization with onnxruntime, and the measurements and outputs both
quantizers (trainers/quantize/embedder.py and reranker.py) write.

The FP32 export is a transformer traced with `torch.onnx.export` (opset 17, batch and
sequence axes dynamic, eager attention: it traces to plain MatMul/Softmax, which every
onnxruntime handles and quantizes). `model_int8.onnx` is its dynamic quantization
(`onnxruntime.quantization.quantize_dynamic`): weights to signed INT8 once, activations
quantized per batch at run time, `VARIANTS` choosing which nodes and how. The quantizers then
time PyTorch FP32, ONNX FP32 and ONNX INT8 with the model layer's own classes (so their
figures are the services'), and write metrics.json, manifest.json and a README.md model card.

Heavy packages (torch, onnx, onnxruntime) are imported only inside the functions.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import platform
import shutil
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from shared.models.encoder import length_batches as encoder_batches
from shared.models.runtime import offline

ONNX_OPSET = 17
FP32_FILE = "model.onnx"
INT8_FILE = "model_int8.onnx"
# Files of a model directory the ONNX pipelines read (tokenizer, configuration); module
# folders of a sentence-transformers model (1_Pooling/, ...) are copied from modules.json.
COPY_FILES = (
    "config.json",
    "config_sentence_transformers.json",
    "modules.json",
    "sentence_bert_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "sentencepiece.bpe.model",
    "spiece.model",
    "merges.txt",
    "added_tokens.json",
)
# name -> (op types quantize_dynamic converts (None: its default set, which adds Gather: the
# embedding tables), one weight scale per output channel, suffix of MatMul names kept FP32).
# MatMuls of two activations (attention scores and context) always stay FP32. The FFN's down
# projection reads GELU outputs, whose outliers cost the most precision; keeping it FP32
# buys fidelity (min cosine 0.992 instead of 0.988) for about 20% of the speed.
VARIANTS: dict[str, tuple[list[str] | None, bool, str | None]] = {
    "matmul-per-channel": (["MatMul"], True, None),
    "all-per-channel": (None, True, None),
    "matmul-per-channel-fp32-ffn-out": (["MatMul"], True, "/output/dense/MatMul"),
    "all": (None, False, None),
    "matmul": (["MatMul"], False, None),
}
DEFAULT_VARIANT = "matmul-per-channel"
# The three engines every quantizer times, in table order.
ENGINES = ("torch_fp32", "onnx_fp32", "onnx_int8")
# An engine maps a batch of inputs (texts, or (query, passage) pairs) to one output row each.
Engine = Callable[[list[Any]], np.ndarray]


# -- export -------------------------------------------------------------------------------


@contextlib.contextmanager
def eager_attention(hf: Any) -> Iterator[None]:
    """The transformer with eager attention for the duration: it traces to plain
    MatMul/Softmax (about 520 nodes for MiniLM-L6 instead of SDPA's 670, same maths)."""
    previous = getattr(hf.config, "_attn_implementation", None)
    if hasattr(hf, "set_attn_implementation"):
        hf.set_attn_implementation("eager")
    try:
        yield
    finally:
        if previous and hasattr(hf, "set_attn_implementation"):
            hf.set_attn_implementation(previous)


def trace_to_onnx(
    hf: Any, output: str, names: list[str], sample: Any, path: Path, output_axes: dict[int, str]
) -> Any:
    """Writes `path`: the transformer's `output` (last_hidden_state, logits...) from the
    tokenizer inputs `names`, batch and sequence dynamic, traced on `sample`. Returns the
    traced module (inputs in `names` order), on CPU and in eval mode."""
    import torch

    class Output(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return getattr(self.inner(**dict(zip(names, inputs, strict=True))), output)

    module = Output(hf).to("cpu").eval()
    axes = {0: "batch", 1: "sequence"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarnings, the TorchScript exporter's notice
        torch.onnx.export(
            module,
            tuple(sample[n] for n in names),
            str(path),
            input_names=names,
            output_names=[output],
            dynamic_axes={**{n: axes for n in names}, output: output_axes},
            opset_version=ONNX_OPSET,
            dynamo=False,
        )
    return module


def copy_model_files(src: Path, out: Path, extra: Sequence[str] = ()) -> list[str]:
    """Tokenizer and configuration (and `extra` files, such as PyTorch weights), so `out` is
    a complete model directory."""
    copied = []
    for name in (*COPY_FILES, *extra):
        if (src / name).is_file():
            shutil.copyfile(src / name, out / name)
            copied.append(name)
    if (src / "modules.json").is_file():
        for module in json.loads((src / "modules.json").read_text(encoding="utf-8")):
            folder = str(module.get("path") or "")
            if folder and (src / folder).is_dir():
                shutil.copytree(src / folder, out / folder, dirs_exist_ok=True)
                copied.append(f"{folder}/")
    return copied


# -- quantization -------------------------------------------------------------------------


def fp32_matmuls(path: Path, suffix: str | None = None) -> list[str]:
    """MatMul nodes left in FP32: those with no constant input (attention scores and context,
    activation by activation) and, with `suffix`, those whose name ends with it (outside the
    attention block)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    constants = {i.name for i in graph.initializer}
    constants |= {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    return [
        n.name
        for n in graph.node
        if n.op_type == "MatMul"
        and (
            not any(i in constants for i in n.input)
            or (suffix and n.name.endswith(suffix) and "/attention/" not in n.name)
        )
    ]


class _NoPreprocessingHint(logging.Filter):
    """onnxruntime.quantization suggests its pre-processing on every call (a root-logger
    warning). Here its symbolic shape inference does not complete on this graph, and the
    rest (ONNX shape inference, graph optimization) measured no faster."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def quiet_quantizer() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _NoPreprocessingHint) for f in root.filters):
        root.addFilter(_NoPreprocessingHint())


def quantize_dynamic_variant(fp32: Path, out: Path, variant: str) -> dict[str, Any]:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quiet_quantizer()
    op_types, per_channel, keep = VARIANTS[variant]
    excluded = fp32_matmuls(fp32, keep)
    quantize_dynamic(
        fp32,
        out,
        op_types_to_quantize=op_types,
        per_channel=per_channel,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=excluded,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return {
        "mode": "dynamic",
        "variant": variant,
        "op_types": op_types or "onnxruntime default (MatMul, Gather, Attention, ...)",
        "per_channel": per_channel,
        "weight_type": "QInt8",
        "activations": "QUInt8, quantized per batch at run time",
        "fp32_nodes": len(excluded),
    }


# -- measuring ----------------------------------------------------------------------------


def prepare(args: argparse.Namespace) -> int:
    """Offline, seeded, and the thread count (`--threads`, 0: every core this process may
    use) set for PyTorch; returns that count for onnxruntime."""
    offline()
    import random

    import torch

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    threads = int(args.threads or len(os.sched_getaffinity(0)))
    torch.set_num_threads(threads)
    return threads


def length_batches(
    texts: Sequence[Any], batch_size: int, length: Callable[[Any], int] = len
) -> list[list[int]]:
    """Longest first, as sentence-transformers and the ONNX pipelines batch (the encoders'
    batch plan, without the CPU split, so timings compare like with like)."""
    lengths = [length(t) for t in texts]
    return [b.tolist() for b in encoder_batches(lengths, batch_size, split=False)]


def run_batches(
    embed: Engine, texts: Sequence[Any], batches: list[list[int]], desc: str, unit: str = "text"
) -> tuple[np.ndarray, float]:
    """Outputs in input order and the seconds the forward passes took (tokenizing included)."""
    from tqdm import tqdm

    out: np.ndarray | None = None
    seconds = 0.0
    with tqdm(total=len(texts), desc=desc, unit=unit, file=sys.stderr, leave=False) as bar:
        for rows in batches:
            batch = [texts[i] for i in rows]
            started = time.perf_counter()
            vectors = embed(batch)
            seconds += time.perf_counter() - started
            if out is None:
                out = np.empty((len(texts), *vectors.shape[1:]), dtype=np.float32)
            out[rows] = vectors
            bar.update(len(rows))
    assert out is not None
    return out, seconds


def measure(
    engines: dict[str, Engine],
    texts: Sequence[Any],
    batch_size: int,
    repeats: int,
    length: Callable[[Any], int] = len,
    unit: str = "text",
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
    """Inputs/s of each engine on the same batches, after one untimed warm-up batch; the
    repeats run interleaved so load from other processes hits every engine alike. `length`
    orders the inputs (longest first) and `unit` names them in the progress bars."""
    batches = length_batches(texts, batch_size, length)
    for embed in engines.values():
        embed([texts[i] for i in batches[0]])  # warm-up: allocations, thread pools
    runs: dict[str, list[float]] = {name: [] for name in engines}
    vectors: dict[str, np.ndarray] = {}
    for repeat in range(repeats):
        for name, embed in engines.items():
            vectors[name], seconds = run_batches(
                embed, texts, batches, f"{name} {repeat + 1}/{repeats}", unit
            )
            runs[name].append(len(texts) / seconds)
    stats = {
        name: {
            "texts_per_s": round(statistics.median(values), 2),
            "runs": [round(v, 2) for v in values],
        }
        for name, values in runs.items()
    }
    return vectors, stats


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def speed_metrics(speed: dict[str, dict[str, Any]], unit: str) -> dict[str, Any]:
    """`<unit>s_per_s` (medians and every run) and the speed-ups over PyTorch FP32."""
    return {
        f"{unit}s_per_s": {
            **{name: s["texts_per_s"] for name, s in speed.items()},
            "runs": {name: s["runs"] for name, s in speed.items()},
        },
        "speedup_vs_torch_fp32": {
            name: round(s["texts_per_s"] / speed["torch_fp32"]["texts_per_s"], 3)
            for name, s in speed.items()
            if name != "torch_fp32"
        },
    }


def speed_summary(metrics: dict[str, Any], unit: str) -> str:
    """The speed part of a quantizer's closing line, from speed_metrics' figures."""
    s = metrics[f"{unit}s_per_s"]
    return (
        f"{unit}s/s: torch FP32 {s['torch_fp32']}, ONNX FP32 {s['onnx_fp32']}, ONNX INT8 "
        f"{s['onnx_int8']} ({metrics['speedup_vs_torch_fp32']['onnx_int8']}x torch)"
    )


def size_mb(out: Path) -> dict[str, float]:
    return {
        "onnx_fp32": round((out / FP32_FILE).stat().st_size / 2**20, 1),
        "onnx_int8": round((out / INT8_FILE).stat().st_size / 2**20, 1),
    }


# -- output -------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def speed_rows(speed: dict[str, Any], torch_label: str) -> str:
    """The model card's table rows: inputs/s of each engine and its ratio to PyTorch FP32."""
    labels = (torch_label, f"ONNX FP32 (`{FP32_FILE}`)", f"ONNX INT8 (`{INT8_FILE}`)")
    return "\n".join(
        f"| {label} | {speed[key]:.1f} | {speed[key] / speed['torch_fp32']:.2f}x |"
        for key, label in zip(ENGINES, labels, strict=True)
    )


def card_lines(manifest: dict[str, Any], what: str) -> tuple[str, str]:
    """The model card's `files` and `quantization` cells; `what` lists the other files."""
    m, q = manifest["metrics"], manifest["quantization"]
    files = (
        f"`{FP32_FILE}` (FP32, {m['size_mb']['onnx_fp32']} MB), `{INT8_FILE}` (INT8, "
        f"{m['size_mb']['onnx_int8']} MB), {what}"
    )
    quantization = (
        f"{q['mode']}, variant `{q['variant']}`, weights {q['weight_type']}, activations "
        f"{q['activations']}"
    )
    return files, quantization


def write_quantized(
    out: Path,
    args: argparse.Namespace,
    started: float,
    card: Callable[[dict[str, Any]], str],
    **fields: Any,
) -> dict[str, Any]:
    """manifest.json (registry fields, file hashes, arguments, library versions and
    `fields`: role, method, format, onnx, quantization, metrics...), metrics.json and the
    README.md model card `card` renders from the manifest; returns the manifest."""
    import onnx
    import onnxruntime
    import sentence_transformers
    import torch
    import transformers

    manifest = {
        "role": fields.pop("role"),
        "name": args.name or out.parent.name,
        "version": args.version or out.name,
        "path": str(out),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        **fields,
        "files": {
            name: {"sha256": sha256(out / name), "bytes": (out / name).stat().st_size}
            for name in (FP32_FILE, INT8_FILE)
        },
        "params": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in ("out", "overwrite")
        },
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
            "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
        },
        "seconds": round(time.perf_counter() - started, 2),
    }
    metrics = manifest["metrics"]
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    (out / "README.md").write_text(card(manifest), encoding="utf-8")
    return manifest


def add_timing_arguments(parser: argparse.ArgumentParser) -> None:
    """How both quantizers time the engines: --repeats, --batch-size, --threads."""
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs per engine.")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="Intra-op threads; 0: all cores.")


def check_arguments(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    positive: Sequence[str],
    not_negative: Sequence[str],
) -> None:
    """parser.error for a flag below 1 (`positive`) or below 0 (`not_negative`)."""
    for flag in positive:
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    for flag in not_negative:
        if getattr(args, flag) < 0:
            parser.error(f"--{flag.replace('_', '-')} must not be negative")
