from pathlib import Path

import pytest
from pydantic import ValidationError

from services.embedder.settings import EmbedderSettings
from services.gateway.settings import GatewaySettings
from services.retriever.settings import RetrieverSettings
from shared.settings import DEFAULT_PORTS


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings tests see only the variables they set (the suite fixture sets ports)."""
    import os

    for key in list(os.environ):
        if key.startswith("RAGRAIL_"):
            monkeypatch.delenv(key)


def test_defaults_work_offline() -> None:
    settings = EmbedderSettings()
    assert settings.port == DEFAULT_PORTS["embedder"][0]
    assert settings.model == ""  # the packaged MiniLM
    assert RetrieverSettings().milvus_uri.endswith(".db")  # Milvus Lite, no server needed


def test_env_overrides_yaml_overrides_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "ragrail.yaml"
    config.write_text("embedder:\n  batch_size: 7\n  port: 6000\ngateway:\n  chunk_overlap: 5\n")
    monkeypatch.setenv("RAGRAIL_CONFIG", str(config))
    monkeypatch.setenv("RAGRAIL_EMBEDDER_PORT", "6001")
    settings = EmbedderSettings()
    assert settings.batch_size == 7  # from YAML
    assert settings.port == 6001  # env wins over YAML
    assert GatewaySettings().chunk_overlap == 5


def test_invalid_values_are_rejected_with_the_field_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGRAIL_EMBEDDER_BATCH_SIZE", "0")
    with pytest.raises(ValidationError, match="batch_size"):
        EmbedderSettings()


def test_unknown_yaml_keys_are_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "ragrail.yaml"
    config.write_text("retriever:\n  milvus_urii: x.db\n")
    monkeypatch.setenv("RAGRAIL_CONFIG", str(config))
    with pytest.raises(ValidationError, match="milvus_urii"):
        RetrieverSettings()


def test_missing_config_file_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGRAIL_CONFIG", "/nonexistent/ragrail.yaml")
    with pytest.raises(FileNotFoundError, match="RAGRAIL_CONFIG"):
        EmbedderSettings()
