"""trainers.generator.distill on a tiny model: the loss terms (KL zero for a student equal to
its teacher, positive otherwise; only assistant positions count), and a run from a LoRA
teacher to a 1-layer student that moves the student toward the teacher."""

from __future__ import annotations

import argparse
import json

import pytest

from shared.models import registry
from tests.trainers.generator_tiny import registry_with_sft
from trainers.generator import distill
from trainers.generator.tokens import IGNORE


def loss_args(kl: str) -> argparse.Namespace:
    return argparse.Namespace(alpha=0.0, beta=1.0, temperature=2.0, kl=kl)


def test_kd_loss_terms() -> None:
    import torch

    generator = torch.Generator().manual_seed(0)
    teacher = torch.randn(2, 5, 11, generator=generator)
    student = torch.randn(2, 5, 11, generator=generator)
    labels = torch.full((2, 5), IGNORE)
    labels[:, 3:] = 4
    for kl in ("reverse", "forward"):
        same, _, kl_same = distill.kd_loss(teacher, teacher, labels, loss_args(kl))
        assert kl_same.item() == pytest.approx(0.0, abs=1e-6)
        assert same.item() == pytest.approx(0.0, abs=1e-5)
        _, _, kl_diff = distill.kd_loss(student, teacher, labels, loss_args(kl))
        assert kl_diff.item() > 0.01
    # positions whose next token is unlabelled do not count
    changed = student.clone()
    changed[:, :2] += 100.0
    a = distill.kd_loss(student, teacher, labels, loss_args("reverse"))[0]
    b = distill.kd_loss(changed, teacher, labels, loss_args("reverse"))[0]
    assert a.item() == pytest.approx(b.item())


def test_distil_a_lora_teacher_into_one_layer(tmp_path_factory: pytest.TempPathFactory) -> None:
    root, data = registry_with_sft(tmp_path_factory, "t")
    assert distill.main(
        ["--data", str(data), "--teacher", "t/v1", "--student-layers", "1", "--models-dir",
         str(root), "--name", "s", "--version", "v1", "--max-steps", "6", "--max-train", "8",
         "--max-eval", "4", "--max-length", "256", "--lr", "0.01", "--alpha", "0.5",
         "--beta", "0.5", "--epochs", "3"]
    ) == 0  # fmt: skip
    entry = registry.resolve("generator", "s", "v1", root)
    assert entry.format == "hf" and entry.manifest["teacher"] == "generator/t/v1-merged"
    config = json.loads((entry.path / "config.json").read_text())
    assert config["num_hidden_layers"] == 1
    metrics = json.loads((entry.path / "metrics.json").read_text())
    assert metrics["student_parameters"] < metrics["teacher_parameters"]
    held = metrics["heldout"]
    assert held["after"]["loss"] < held["before"]["loss"]
    assert metrics["train"]["steps"] == 6
