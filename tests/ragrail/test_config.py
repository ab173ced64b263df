"""`ragrail up --config FILE`: the file is checked by every service's own settings class before
anything starts, and the examples in examples/ (one per model server, docs/model-servers.md)
all pass that check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragrail.config import SECTIONS, ConfigError, check_config
from tests.conftest import REPO

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.fixture(autouse=True)
def no_ragrail_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The file alone decides (a developer's RAGRAIL_* variables would win over it)."""
    for key in [k for k in os.environ if k.startswith("RAGRAIL_")]:
        monkeypatch.delenv(key)


def test_there_is_an_example_per_model_server() -> None:
    names = {p.stem for p in EXAMPLES}
    assert {"llama-cpp-server", "ollama", "vllm", "nim"} <= names


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_with_the_services_settings(example: Path) -> None:
    checked = check_config(example)
    assert "generator" in checked
    assert checked["generator"].engine == "openai"
    assert checked["generator"].remote_url.startswith("http")
    for section in ("embedder", "reranker"):
        if section in checked:
            assert checked[section].backend in ("openai", "rerank", "nim")
            assert checked[section].remote_url.startswith("http")
    text = example.read_text(encoding="utf-8")
    assert "ragrail up --config examples/" + example.name in text, "say how to run it"


def test_nim_example_speaks_nim(tmp_path: Path) -> None:
    checked = check_config(REPO / "examples" / "nim.yaml")
    assert checked["embedder"].remote_input_type is True
    assert checked["reranker"].backend == "nim"
    assert checked["reranker"].remote_url.endswith("/v1")


def test_every_mistake_is_named_with_its_section_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "generator:\n  engine: openia\n  remote_ulr: http://x/v1\n"
        "embedder:\n  remote_batch_size: 0\n"
        "gpu:\n  count: 1\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        check_config(bad)
    message = str(caught.value)
    assert str(bad) in message
    for expected in ("generator.engine", "generator.remote_ulr", "embedder.remote_batch_size"):
        assert expected in message, message
    assert "unknown section 'gpu'" in message and "generator" in message


def test_not_a_mapping_or_not_yaml_is_said_so(tmp_path: Path) -> None:
    listed = tmp_path / "list.yaml"
    listed.write_text("- generator\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="expected a mapping"):
        check_config(listed)
    broken = tmp_path / "broken.yaml"
    broken.write_text("generator: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        check_config(broken)
    with pytest.raises(ConfigError, match="not a file"):
        check_config(tmp_path / "missing.yaml")


def test_every_section_is_a_settings_class() -> None:
    from ragrail.config import settings_class

    for section in SECTIONS:
        assert settings_class(section).service_name == section


def test_up_with_a_bad_config_stops_before_starting_anything(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("generator:\n  engine: openia\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
    done = subprocess.run(
        [sys.executable, "-m", "ragrail.cli", "up", "--config", str(bad), "--data-dir",
         str(tmp_path / "data")],
        capture_output=True, text=True, timeout=60, cwd=REPO, env=env,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "generator.engine" in done.stdout
    assert "starting" not in done.stdout
    assert not (tmp_path / "data" / "logs").exists()
