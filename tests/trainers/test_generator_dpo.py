"""trainers.generator.dpo on a tiny model: DPO starts from an SFT LoRA version merged into its
base (a registry version of its own), the frozen reference equals the starting policy (the
first loss is ln 2), and the DPO adapter is a registry version on that merged base."""

from __future__ import annotations

import json
import math

import pytest

from shared.models import registry
from tests.trainers.generator_tiny import registry_with_sft
from trainers.generator import dpo


def test_dpo_from_an_sft_version(tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("trl", reason="DPO needs the train-generator extra (trl)")
    root, data = registry_with_sft(tmp_path_factory, "g")
    assert dpo.main(
        ["--data", str(data), "--base", "g/v1", "--models-dir", str(root), "--name", "g",
         "--version", "v1-dpo", "--max-steps", "2", "--max-train", "4", "--max-eval", "4",
         "--max-length", "256", "--lr", "0.01", "--lora-r", "4"]
    ) == 0  # fmt: skip
    entry = registry.resolve("generator", "g", "v1-dpo", root)
    assert entry.format == "peft-lora" and entry.manifest["method"] == "dpo-lora"
    assert entry.base == "generator/g/v1-merged"
    assert registry.resolve_ref(entry.base, root).format == "hf"
    assert (entry.path / "adapter_config.json").is_file()
    metrics = json.loads((entry.path / "metrics.json").read_text())
    # policy == reference at the first step: every reward is 0 and the loss is ln 2
    assert metrics["train"]["loss_first"] == pytest.approx(math.log(2), abs=1e-3)
    assert metrics["train"]["steps"] == 2
    held = metrics["heldout"]
    assert 0.0 <= held["reward_accuracy"] <= 1.0 and math.isfinite(held["reward_margin"])
