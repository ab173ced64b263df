"""trainers.generator.sft on a tiny random Llama with SmolLM2's tokenizer: the label mask covers
assistant tokens only, packing keeps every token, LoRA and full runs write registry versions,
an interrupted run resumed equals one run straight through, QLoRA refuses on a CPU, and the
LoRA adapter serves in the generator's torch engine and changes its answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shared.models import registry
from tests.trainers.generator_tiny import grounding_set, tiny_registry
from trainers.generator import sft
from trainers.generator.tokens import IGNORE, encode_chat, pack

CHAT = [
    {"role": "system", "content": "Use the sources."},
    {"role": "user", "content": "Sources:\n[1] Bees dance.\n\nQuestion: What do bees do?"},
    {"role": "assistant", "content": "According to [1]: Bees dance. [1]"},
    {"role": "user", "content": "And ants?"},
    {"role": "assistant", "content": "The sources do not say."},
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("registry")
    tiny_registry(root)
    return root


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return grounding_set(
        tmp_path_factory.mktemp("grounding"), "--heldout", "0.3", "--source-chars", "200"
    )


def tokenizer(root: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        str(registry.resolve("generator", "tiny", "base", root).path)
    )


def run(root: Path, data: Path, *extra: str) -> Path:
    args = [
        "--data", str(data), "--base", "generator/tiny/base", "--models-dir", str(root),
        "--max-length", "192", "--batch-size", "2", "--lr", "0.01", "--max-train", "8",
        "--max-eval", "4", "--seed", "3", "--lora-r", "4", "--lora-alpha", "8", *extra,
    ]  # fmt: skip
    assert sft.main(args) == 0
    name, version = args[args.index("--name") + 1], args[args.index("--version") + 1]
    return registry.version_dir("generator", name, version, root)


def test_labels_cover_assistant_turns_only(tiny: Path) -> None:
    tok = tokenizer(tiny)
    ids, labels = encode_chat(tok, CHAT, 1024)
    assert (
        ids
        == tok(tok.apply_chat_template(CHAT, tokenize=False), add_special_tokens=False)["input_ids"]
    )
    labelled = [i for i, label in zip(ids, labels, strict=True) if label != IGNORE]
    assert all(label in (IGNORE, i) for i, label in zip(ids, labels, strict=True))
    text = tok.decode(labelled)
    assert text == (
        "According to [1]: Bees dance. [1]<|im_end|>\nThe sources do not say.<|im_end|>\n"
    )
    # Nothing of the system prompt, the sources or the questions is learnt.
    assert "Bees dance.\n\nQuestion" not in text and "ants" not in text
    short_ids, short_labels = encode_chat(tok, CHAT, 16)
    assert len(short_ids) == 16 and all(label == IGNORE for label in short_labels)


def test_pack_keeps_every_token_within_the_length() -> None:
    examples = [([1] * n, [2] * n) for n in (5, 7, 3, 9, 2)]
    packed = pack(examples, 12)
    assert [len(ids) for ids, _ in packed] == [12, 12, 2]
    assert sum(len(ids) for ids, _ in packed) == 26
    assert all(len(ids) == len(labels) for ids, labels in packed)


def test_lora_run_writes_a_registry_version(tiny: Path, dataset: Path) -> None:
    out = run(tiny, dataset, "--name", "g", "--version", "v1", "--epochs", "2", "--pack")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "peft-lora" and manifest["method"] == "sft-lora"
    assert manifest["base"] == "generator/tiny/base"
    assert (out / "adapter_config.json").is_file() and (out / "README.md").is_file()
    assert not (out / sft.CHECKPOINT).exists()
    metrics = json.loads((out / "metrics.json").read_text())
    before, after = metrics["heldout"]["before"], metrics["heldout"]["after"]
    assert before["tokens"] == after["tokens"] > 0
    # lr 0.01 on a random model: the held-out loss on the fixed answer phrases must fall.
    assert after["loss"] < before["loss"]
    assert metrics["train"]["steps"] >= 2 and metrics["train"]["tokens_per_s"] > 0
    assert registry.resolve("generator", "g", root=tiny).path == out


def test_full_fine_tune_writes_a_model_directory(tiny: Path, dataset: Path) -> None:
    from transformers import AutoModelForCausalLM

    out = run(
        tiny, dataset, "--name", "full", "--version", "v1", "--method", "full", "--max-steps", "2"
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "hf" and manifest["method"] == "sft-full"
    assert (out / "tokenizer.json").is_file()
    AutoModelForCausalLM.from_pretrained(str(out))


def test_resume_after_an_interruption_equals_an_uninterrupted_run(
    tiny: Path, dataset: Path
) -> None:
    from safetensors.torch import load_file

    common = ("--max-steps", "4", "--epochs", "3", "--save-every", "1", "--skip-before")
    straight = run(tiny, dataset, "--name", "r", "--version", "straight", *common)
    cut = run(tiny, dataset, "--name", "r", "--version", "cut", "--stop-after", "2", *common)
    assert (cut / sft.CHECKPOINT / "state.pt").is_file() and not (cut / "manifest.json").exists()
    run(tiny, dataset, "--name", "r", "--version", "cut", "--resume", *common)
    a = load_file(straight / "adapter_model.safetensors")
    b = load_file(cut / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        assert (a[key] - b[key]).abs().max() < 1e-5, key
    m_a = json.loads((straight / "metrics.json").read_text())
    m_b = json.loads((cut / "metrics.json").read_text())
    assert m_b["train"]["steps"] == m_a["train"]["steps"] == 4
    assert m_b["heldout"]["after"]["loss"] == pytest.approx(m_a["heldout"]["after"]["loss"], 1e-4)


def test_qlora_without_a_gpu_stops_with_a_clear_message(tiny: Path, dataset: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: QLoRA would run")
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        run(tiny, dataset, "--name", "q", "--version", "v1", "--qlora")
    assert not registry.version_dir("generator", "q", "v1", tiny).exists()
