"""The hand-over from training to serving: a LoRA adapter trained by trainers.generator.sft on
a tiny model is named by its registry version (RAGRAIL_GENERATOR_REGISTRY_MODEL), loads in the
generator's torch engine as a process, and changes its greedy answers against the base."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.generator.conftest import Service, start, stop, wait_serving
from tests.trainers.generator_tiny import grounding_set, tiny_registry
from trainers.generator import sft

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("registry")
    tiny_registry(root)
    data = grounding_set(tmp_path_factory.mktemp("grounding"), "--source-chars", "200")
    sft.main(
        [
            "--data", str(data), "--base", "generator/tiny/base", "--models-dir", str(root),
            "--name", "grounded", "--version", "v1", "--max-length", "192", "--batch-size", "4",
            "--lr", "0.05", "--max-steps", "3", "--max-train", "12", "--max-eval", "2",
            "--skip-before",
        ]
    )  # fmt: skip
    return root


@pytest.fixture(scope="module")
def services(trained: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    logs = tmp_path_factory.mktemp("logs")
    both = {
        "base": start("tiny-base", logs, engine="torch", registry_model="tiny/base",
                      models_dir=str(trained)),
        "sft": start("tiny-sft", logs, engine="torch", registry_model="grounded",
                     models_dir=str(trained)),
    }  # fmt: skip
    try:
        for service in both.values():
            wait_serving(service, timeout=120)
        yield both
    finally:
        stop(list(both.values()))


def test_registry_lora_version_serves_and_changes_answers(
    services: dict[str, Service], trained: Path
) -> None:
    base, tuned = services["base"], services["sft"]
    base_info, tuned_info = base.info().service, tuned.info().service
    assert base_info.model == str(trained / "generator" / "tiny" / "base")
    # The LoRA version resolves to its base model plus its own directory as the adapter.
    assert tuned_info.model == base_info.model
    assert tuned_info.details["adapter"] == str(trained / "generator" / "grounded" / "v1")
    answers = {
        name: service.generate(temperature=0, max_tokens=12).text
        for name, service in services.items()
    }
    assert answers["base"] and answers["sft"]
    assert answers["base"] != answers["sft"]
    assert base.generate(temperature=0, max_tokens=12).text == answers["base"]  # greedy holds
