"""A classifier trained by `python -m trainers.guardrails` on tests/fixtures/injections (the
frozen-encoder recipe: seconds, no fine-tuning), and helpers to run the service on it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "injections"
PACKAGED_CONFIG = REPO / "services" / "guardrails" / "config"


@pytest.fixture(scope="session")
def injection_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("guardrails-model") / "tiny"
    done = subprocess.run(
        [
            sys.executable, "-m", "trainers.guardrails", "--data", str(FIXTURE), "--out",
            str(out), "--method", "head", "--max-length", "64", "--folds", "3", "--seed", "5",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, f"training failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return out


def config_copy(target: Path, input_flows: list[str] | None = None, **ragrail: dict) -> Path:
    """The packaged config directory with `custom_data.ragrail` sections replaced (and the
    input flows, when given); grounding is pinned to embeddings so a reranker under models/
    cannot change the verdicts."""
    shutil.copytree(PACKAGED_CONFIG, target)
    config = yaml.safe_load((target / "config.yml").read_text(encoding="utf-8"))
    section = config["custom_data"]["ragrail"]
    section["grounding"]["scorer"] = "embedding"
    for key, value in ragrail.items():
        section[key] = {**section.get(key, {}), **value}
    if input_flows is not None:
        config["rails"]["input"]["flows"] = input_flows
    (target / "config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return target
