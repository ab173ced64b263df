"""Export a registry generator for each serving engine.

    python -m trainers.generator.export merge smollm2-grounded/v1    # LoRA into its base
    python -m trainers.generator.export gguf smollm2-grounded/v1 --types F16 Q8_0 Q4_K_M
    python -m trainers.generator.export modelopt smollm2-grounded/v1 --quant fp8   # GPU only

Each result is a new registry version of the same name: `<version>-merged` (format `hf`: the
torch engine, TensorRT-LLM's LLM API / trtllm-serve), `<version>-<type>` (format `gguf`:
the llamacpp engine), `<version>-<quant>` (ModelOpt's HF checkpoint for TensorRT-LLM). A LoRA
version is merged into its base first. Serve one with
RAGRAIL_GENERATOR_REGISTRY_MODEL=<name>/<version>.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from shared.models import registry
from trainers.generator.gguf_export import QUANT_TYPES, hf_to_gguf, quantize

os.environ.setdefault("HF_HUB_OFFLINE", "1")
MODELOPT_NEEDS_GPU = (
    "ModelOpt's FP8 and INT4-AWQ quantization calibrates on a CUDA GPU and exports checkpoints "
    "for TensorRT-LLM, which runs on GPUs only; no GPU is present here. Export GGUF "
    "(Q8_0/Q4_K_M) for the llamacpp engine on a CPU instead."
)
MODELOPT_CONFIGS = {"fp8": "FP8_DEFAULT_CFG", "int4_awq": "INT4_AWQ_CFG"}


def entry_of(ref: str, root: str | None) -> registry.Entry:
    name, _, version = ref.partition("/")
    try:
        return registry.resolve("generator", name, version or registry.LATEST, root)
    except registry.RegistryError as exc:
        raise SystemExit(str(exc)) from exc


def derived(entry: registry.Entry, suffix: str, root: str | None) -> Path:
    out = registry.version_dir("generator", entry.name, f"{entry.version}-{suffix}", root)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


def merge(entry: registry.Entry, root: str | None) -> registry.Entry:
    """An `hf` entry: the entry itself, or a LoRA version merged into its base."""
    if entry.format == "hf":
        return entry
    if entry.format != "peft-lora":
        raise SystemExit(f"{entry.ref} has format {entry.format}; merge takes hf or peft-lora")
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = registry.resolve_ref(entry.base, root)
    model = AutoModelForCausalLM.from_pretrained(str(base.path), dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, str(entry.path)).merge_and_unload()
    out = derived(entry, "merged", root)
    merged.save_pretrained(out)
    AutoTokenizer.from_pretrained(str(base.path)).save_pretrained(out)
    manifest = registry.manifest(
        "generator",
        entry.name,
        out.name,
        base=entry.ref,
        method=f"{entry.manifest.get('method', 'lora')} merged into {base.ref}",
        fmt="hf",
        data=entry.manifest.get("data", {}),
        metrics=entry.manifest.get("metrics", {}),
    )
    registry.write_manifest(out, manifest)
    return registry.resolve("generator", entry.name, out.name, root)


def export_gguf(
    entry: registry.Entry, types: list[str], root: str | None, threads: int = 0
) -> list[registry.Entry]:
    """One registry version per type: F16/F32 written here, the rest quantized from F16."""
    bad = [t for t in types if t not in ("F16", "F32", *QUANT_TYPES)]
    if bad:
        raise SystemExit(f"GGUF types {bad}: choose from F16, F32, {', '.join(QUANT_TYPES)}")
    hf = merge(entry, root)
    written: list[registry.Entry] = []
    f16: Path | None = None
    for qtype in types:
        out = derived(entry, qtype.lower(), root)
        file = out / f"model-{qtype.lower()}.gguf"
        if qtype in ("F16", "F32"):
            hf_to_gguf(hf.path, file, qtype)
            f16 = file if qtype == "F16" else f16
        else:
            if f16 is None or not f16.is_file():
                f16 = out / "source-f16.gguf"
                hf_to_gguf(hf.path, f16, "F16")
            quantize(f16, file, qtype, threads)
            if f16.parent == out:
                f16.unlink()
                f16 = None
        registry.write_manifest(
            out,
            registry.manifest(
                "generator",
                entry.name,
                out.name,
                base=hf.ref,
                method=f"GGUF {qtype}" + ("" if qtype in ("F16", "F32") else " (llama.cpp)"),
                fmt="gguf",
                file=file.name,
                bytes=file.stat().st_size,
                data=entry.manifest.get("data", {}),
            ),
        )
        written.append(registry.resolve("generator", entry.name, out.name, root))
    return written


def export_modelopt(entry: registry.Entry, quant: str, root: str | None) -> registry.Entry:
    """ModelOpt FP8 or INT4-AWQ HF checkpoint for TensorRT-LLM's LLM API (GPU only)."""
    import torch

    if quant not in MODELOPT_CONFIGS:
        raise SystemExit(f"--quant {quant}: choose from {sorted(MODELOPT_CONFIGS)}")
    if not torch.cuda.is_available():
        raise SystemExit(MODELOPT_NEEDS_GPU)
    try:  # pragma: no cover - GPU machines only
        import modelopt.torch.quantization as mtq
        from modelopt.torch.export import export_hf_checkpoint
    except ImportError as exc:  # pragma: no cover
        raise SystemExit("ModelOpt is not installed: pip install nvidia-modelopt") from exc
    from transformers import AutoModelForCausalLM, AutoTokenizer  # pragma: no cover

    hf = merge(entry, root)  # pragma: no cover
    model = AutoModelForCausalLM.from_pretrained(str(hf.path), dtype=torch.bfloat16).cuda()
    tokenizer = AutoTokenizer.from_pretrained(str(hf.path))
    prompts = ["The sources say that", "According to [1]:", "Question: what is"] * 8

    def forward_loop(m: object) -> None:  # calibration on a few grounding-style prompts
        for text in prompts:
            m(**tokenizer(text, return_tensors="pt").to("cuda"))  # type: ignore[operator]

    model = mtq.quantize(model, getattr(mtq, MODELOPT_CONFIGS[quant]), forward_loop)
    out = derived(entry, quant, root)
    export_hf_checkpoint(model, export_dir=str(out))
    tokenizer.save_pretrained(out)
    registry.write_manifest(
        out,
        registry.manifest(
            "generator", entry.name, out.name, base=hf.ref, method=f"ModelOpt {quant}",
            fmt="hf-modelopt",
        ),
    )  # fmt: skip
    return registry.resolve("generator", entry.name, out.name, root)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Export a registry generator for an engine.")
    p.add_argument("--models-dir", default=None, help="registry root (default models/)")
    sub = p.add_subparsers(dest="what", required=True)
    m = sub.add_parser("merge", help="LoRA merged into its base: an HF checkpoint")
    m.add_argument("model", help="name or name/version in models/generator/")
    g = sub.add_parser("gguf", help="GGUF files for the llamacpp engine")
    g.add_argument("model")
    g.add_argument("--types", nargs="+", default=["F16", "Q8_0", "Q4_K"])
    g.add_argument("--threads", type=int, default=0)
    o = sub.add_parser("modelopt", help="FP8 / INT4-AWQ for TensorRT-LLM (GPU only)")
    o.add_argument("model")
    o.add_argument("--quant", choices=sorted(MODELOPT_CONFIGS), default="fp8")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    entry = entry_of(args.model, args.models_dir)
    if args.what == "merge":
        done = [merge(entry, args.models_dir)]
    elif args.what == "gguf":
        done = export_gguf(entry, args.types, args.models_dir, args.threads)
    else:
        done = [export_modelopt(entry, args.quant, args.models_dir)]
    for result in done:
        print(f"{result.ref} ({result.format}) in {result.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
