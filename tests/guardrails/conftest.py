"""The guard model trained by `python -m trainers.guardrails --all` on tests/fixtures/guard
(a few hundred hand-made rows, one trained layer: about 90 CPU seconds), the older single-head
classifier on tests/fixtures/injections (frozen-encoder recipe), and helpers to run the
service on them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, built_once

FIXTURE = REPO / "tests" / "fixtures" / "injections"
GUARD_FIXTURE = REPO / "tests" / "fixtures" / "guard"
PACKAGED_CONFIG = REPO / "services" / "guardrails" / "config"
GUARD_TRAINING = [
    "--all", "--data", str(GUARD_FIXTURE), "--frozen-layers", "5", "--epochs", "8",
    "--holdout", "0.3", "--max-length", "64", "--planted-per-passage", "2", "--seed", "5",
    "--repeat", "prompt_injections/prompt_injections", "1", "--batch-size", "32",
    "--lr", "1e-4", "--head-lr", "2e-3", "--patience", "0",
]  # fmt: skip
# The fixture model learns from a few hundred rows, and its held-out part (a few dozen) is
# too small to choose thresholds that hold on other text: the service tests set them in
# config.yml (what a user does to override guard.json). The real recipe chooses them on
# thousands of held-out rows (trainers/guardrails/guard.py).
GUARD_THRESHOLDS = {
    "injection": {"threshold": 2.0},
    "content_safety": {"threshold": 2.0},
    "document_injection": {"threshold": 3.0},
}


@pytest.fixture(scope="session")
def guard_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "guard-model", train_guard_model)


def train_guard_model(out: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainers.guardrails", *GUARD_TRAINING, "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin",
             "TQDM_DISABLE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, f"training failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="session")
def injection_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "injection-model", train_injection_model)


def train_injection_model(out: Path) -> None:
    done = subprocess.run(
        [
            sys.executable, "-m", "trainers.guardrails.baseline", "--data", str(FIXTURE), "--out",
            str(out), "--method", "head", "--max-length", "64", "--folds", "3", "--seed", "5",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, f"training failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def config_copy(target: Path, input_flows: list[str] | None = None, **ragrail: dict) -> Path:
    """The packaged config directory with `custom_data.ragrail` sections replaced (and the
    input flows, when given); grounding is pinned to embeddings so a reranker under models/
    cannot change the verdicts."""
    shutil.copytree(PACKAGED_CONFIG, target)
    config = yaml.safe_load((target / "config.yml").read_text(encoding="utf-8"))
    section = config["custom_data"]["ragrail"]
    section["grounding"]["scorer"] = "embedding"
    for key, value in {**GUARD_THRESHOLDS, **ragrail}.items():
        section[key] = {**section.get(key, {}), **value}
    if input_flows is not None:
        config["rails"]["input"]["flows"] = input_flows
    (target / "config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return target
