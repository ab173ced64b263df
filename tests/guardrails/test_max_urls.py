"""The example rail of docs/adding-a-rail.md, `ragrail max urls` (services/guardrails/rails/
max_urls/), through the real guardrails service: off in the packaged config, and once
config.yml lists its flow, run by both engines from the same folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shared.proto.ragrail.v1 import guardrails_pb2
from tests.conftest import grpc_service
from tests.guardrails.conftest import PACKAGED_CONFIG, config_copy
from tests.guardrails.test_failures import input_check

pytestmark = pytest.mark.integration
LINKS = "See https://a.example/x, http://b.example/y and www.c.example/z for the details."
ONE_LINK = "What does https://en.wikipedia.org/wiki/Waggle_dance say about bees?"


def test_off_in_the_packaged_config() -> None:
    config = yaml.safe_load((PACKAGED_CONFIG / "config.yml").read_text(encoding="utf-8"))
    assert "ragrail max urls" not in config["rails"]["input"]["flows"]
    assert config["custom_data"]["ragrail"]["max_urls"] == {"max_urls": 3}


@pytest.mark.parametrize("engine", ["nemo", "direct"])
def test_blocks_a_message_with_too_many_links(
    guard_model: Path, tmp_path: Path, engine: str
) -> None:
    config = config_copy(
        tmp_path / "config",
        input_flows=["ragrail limits", "ragrail max urls", "ragrail injection"],
        max_urls={"max_urls": 2},
    )
    env = {
        "RAGRAIL_GUARDRAILS_GUARD_MODEL": str(guard_model),
        "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(config),
        "RAGRAIL_GUARDRAILS_ENGINE": engine,
    }
    with grpc_service("services.guardrails", "GUARDRAILS", env, tmp_path / "log") as target:
        blocked = input_check(target, LINKS)
        assert blocked.verdict == guardrails_pb2.VERDICT_BLOCK, blocked
        assert blocked.rail == "ragrail max urls"
        assert blocked.reason == "3 links, more than the limit of 2"
        # The rails before it ran, the ones after it did not.
        assert [a.rail for a in blocked.activations] == ["ragrail limits", "ragrail max urls"]

        allowed = input_check(target, ONE_LINK)
        assert allowed.verdict == guardrails_pb2.VERDICT_ALLOW, allowed
        assert [a.rail for a in allowed.activations] == [
            "ragrail limits",
            "ragrail max urls",
            "ragrail injection",
        ]
