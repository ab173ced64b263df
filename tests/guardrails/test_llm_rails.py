"""NeMo Guardrails' LLM rails on ragrail's generator: the guardrails service (engine nemo)
with `self check input` / `self check output` and `engine: ragrail_generator` as its main
model, against the real generator (llama.cpp on the packaged SmolLM2-135M) as a process.

What the tiny model answers is not the point: the tests check that the rail ran, that the
call reached the generator, and that its verdict is reported; and that a generator that
cannot be reached blocks the check with a reason saying so (fail closed)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
import yaml

from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2, guardrails_pb2_grpc
from tests.conftest import free_port, grpc_service
from tests.generator.conftest import Service, serving
from tests.guardrails.conftest import config_copy
from tests.guardrails.test_failures import input_check, start_and_fail

pytestmark = pytest.mark.integration
ALLOW, BLOCK = guardrails_pb2.VERDICT_ALLOW, guardrails_pb2.VERDICT_BLOCK
CONTEXT = "Honeybees perform a waggle dance to tell other bees where flowers are."


@pytest.fixture(scope="module")
def generator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    logs = tmp_path_factory.mktemp("llm-rails-generator")
    with serving("llamacpp", logs, engine="llamacpp") as service:
        yield service


def llm_config(target: Path, url: str, input_flows: list[str], output_flows: list[str]) -> Path:
    config = config_copy(target)
    data = yaml.safe_load((config / "config.yml").read_text(encoding="utf-8"))
    data["models"].append(
        {
            "type": "main",
            "engine": "ragrail_generator",
            "model": "default",
            "parameters": {"url": url, "timeout_s": 60},
        }
    )
    data["rails"]["input"]["flows"] = input_flows
    data["rails"]["output"]["flows"] = output_flows
    (config / "config.yml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return config


def generator_requests(service: Service) -> float:
    text = httpx.get(f"http://127.0.0.1:{service.metrics_port}/metrics", timeout=10).text
    return sum(
        float(m[1])
        for m in re.finditer(r"^ragrail_generator_requests_total\{[^}]*\} (\S+)$", text, re.M)
    )


def check_output(target: str, answer: str) -> guardrails_pb2.RailResult:
    async def go() -> guardrails_pb2.RailResult:
        async with grpc.aio.insecure_channel(target) as channel:
            return await guardrails_pb2_grpc.GuardrailsStub(channel).CheckOutput(
                guardrails_pb2.CheckOutputRequest(
                    messages=[common_pb2.ChatMessage(role="user", content="How do bees talk?")],
                    answer=answer,
                    context=[common_pb2.TextPassage(id="0", text=CONTEXT)],
                ),
                timeout=120,
            )

    return asyncio.run(go())


def activation(result: guardrails_pb2.RailResult, rail: str) -> guardrails_pb2.RailActivation:
    found = [a for a in result.activations if a.rail == rail]
    assert found, f"{rail} did not run: {result}"
    return found[0]


def test_self_checks_run_on_the_generator_and_report_their_verdict(
    generator: Service, guard_model: Path, tmp_path: Path
) -> None:
    config = llm_config(
        tmp_path / "config",
        generator.target,
        ["ragrail limits", "self check input"],
        ["self check output"],
    )
    env = {
        "RAGRAIL_GUARDRAILS_GUARD_MODEL": str(guard_model),
        "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(config),
    }
    with grpc_service("services.guardrails", "GUARDRAILS", env, tmp_path / "log") as target:
        before = generator_requests(generator)
        result = input_check(target, "How do honeybees tell each other where flowers are?")
        rail = activation(result, "self check input")
        assert not rail.errored, result
        assert rail.verdict in (ALLOW, BLOCK)
        # The verdict is the model's answer, reported as such, and it decided the check.
        assert "ragrail_generator" in rail.reason and "answered" in rail.reason, rail
        assert result.verdict == rail.verdict
        if rail.verdict == BLOCK:
            assert result.rail == "self check input"
        after_input = generator_requests(generator)
        assert after_input == before + 1  # exactly one Generate call reached the generator

        result = check_output(target, CONTEXT)
        rail = activation(result, "self check output")
        assert not rail.errored, result
        assert "answered" in rail.reason and result.verdict == rail.verdict
        assert generator_requests(generator) == after_input + 1


def test_unreachable_generator_blocks_input_and_says_why(guard_model: Path, tmp_path: Path) -> None:
    nowhere = f"127.0.0.1:{free_port()}"  # nothing listens there
    config = llm_config(tmp_path / "config", nowhere, ["self check input"], [])
    data = yaml.safe_load((config / "config.yml").read_text(encoding="utf-8"))
    data["models"][-1]["parameters"]["timeout_s"] = 3
    (config / "config.yml").write_text(yaml.safe_dump(data), encoding="utf-8")
    env = {
        "RAGRAIL_GUARDRAILS_GUARD_MODEL": str(guard_model),
        "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(config),
    }
    with grpc_service("services.guardrails", "GUARDRAILS", env, tmp_path / "log") as target:
        result = input_check(target, "What is a waggle dance?")
        assert result.verdict == BLOCK, result
        assert result.rail == "self check input"
        rail = activation(result, "self check input")
        assert rail.errored and rail.verdict == BLOCK
        assert nowhere in result.reason and "did not answer" in result.reason, result.reason
        assert "failing closed" in result.reason


def test_llm_rail_without_a_model_stops_startup(guard_model: Path, tmp_path: Path) -> None:
    config = config_copy(tmp_path / "config")
    data = yaml.safe_load((config / "config.yml").read_text(encoding="utf-8"))
    data["rails"]["input"]["flows"].append("self check input")
    (config / "config.yml").write_text(yaml.safe_dump(data), encoding="utf-8")
    done = start_and_fail(
        {
            "RAGRAIL_GUARDRAILS_GUARD_MODEL": str(guard_model),
            "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(config),
        }
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output[-3000:]
    assert "self check input" in output and "ragrail_generator" in output
    assert "Traceback" not in output
