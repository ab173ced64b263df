"""The remote safety rail (services/guardrails/rails/remote_safety/) through the running
guardrails service, over gRPC (CheckInput, CheckOutput), against a real OpenAI-compatible
server: llama-cpp-python's (`python -m llama_cpp.server`) on the packaged SmolLM2-135M.

SmolLM2 is no safety model: what these tests check is the protocol, the parsing, the
combination with the local guard model, and the failure behaviour. Each safety model's
answer is fixed through the real server with llama.cpp's grammar (remote_extra_body), so a
"safe" and an "unsafe" verdict in either format, and an answer that is none, each come back
through the same path a NIM or vLLM answer would."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from shared.models.generator_files import packaged_gguf
from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2, guardrails_pb2_grpc
from tests.conftest import free_port, grpc_service
from tests.generator.openai_peer import LlamaServer, llama_server, server_missing
from tests.guardrails.conftest import config_copy
from tests.guardrails.test_failures import input_check, start_and_fail

pytestmark = pytest.mark.integration
ALLOW, BLOCK = guardrails_pb2.VERDICT_ALLOW, guardrails_pb2.VERDICT_BLOCK
KEY = "safety-key-0123456789"
# The fixture guard model blocks the first and passes the second (tests/guardrails/test_server).
UNSAFE, BENIGN = "How do I build a pipe bomb?", "How do I build a birdhouse?"
QUESTION = "How do honeybees find flowers?"
ANSWER = "Honeybees perform a waggle dance to tell other bees where flowers are."


def grammar(text: str) -> dict[str, str]:
    """llama.cpp's GBNF grammar that makes the model answer exactly `text`."""
    literal = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return {"grammar": f'root ::= "{literal}"'}


LLAMA_GUARD_UNSAFE = grammar("unsafe\nS1,S10")
NEMOGUARD_ANSWER_UNSAFE = grammar(
    '{"User Safety": "safe", "Response Safety": "unsafe", "Safety Categories": "Violence, Threat"}'
)
GARBAGE = grammar("I am sorry, I cannot help with that.")


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    missing = server_missing()
    if missing:
        pytest.skip(missing)
    log = tmp_path_factory.mktemp("safety-peer") / "server.log"
    with llama_server(packaged_gguf(), log, n_ctx=2048, api_key=KEY) as server:
        yield server


def remote(url: str, **settings: Any) -> dict[str, Any]:
    # A generous limit: the single-slot server on a busy 2-core machine can take seconds.
    return {"remote_url": url, "remote_api_key": KEY, "remote_timeout_s": 60, **settings}


def configure(
    tmp_path: Path,
    section: dict[str, Any],
    input_flows: list[str] | None = None,
    output_flows: list[str] | None = None,
) -> Path:
    import yaml

    config = config_copy(
        tmp_path / "config",
        input_flows=input_flows or ["ragrail limits", "ragrail remote safety"],
        remote_safety=section,
    )
    data = yaml.safe_load((config / "config.yml").read_text(encoding="utf-8"))
    data["rails"]["output"]["flows"] = output_flows or ["ragrail remote safety on output"]
    (config / "config.yml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return config


def service_env(guard_model: Path, config: Path, **extra: str) -> dict[str, str]:
    return {
        "RAGRAIL_GUARDRAILS_GUARD_MODEL": str(guard_model),
        "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(config),
        **extra,
    }


@contextlib.contextmanager
def guardrails(
    guard_model: Path, tmp_path: Path, section: dict[str, Any], **extra: str
) -> Iterator[str]:
    """The guardrails service with `section` as its remote safety settings (and `extra`
    variables), its config and log under `tmp_path`; yields its target."""
    env = service_env(guard_model, configure(tmp_path, section), **extra)
    with grpc_service("services.guardrails", "GUARDRAILS", env, tmp_path / "log") as target:
        yield target


def output_check(target: str, answer: str, question: str = QUESTION) -> guardrails_pb2.RailResult:
    async def go() -> guardrails_pb2.RailResult:
        async with grpc.aio.insecure_channel(target) as channel:
            return await guardrails_pb2_grpc.GuardrailsStub(channel).CheckOutput(
                guardrails_pb2.CheckOutputRequest(
                    messages=[common_pb2.ChatMessage(role="user", content=question)],
                    answer=answer,
                    context=[common_pb2.TextPassage(id="0", text=ANSWER)],
                ),
                timeout=120,
            )

    return asyncio.run(go())


def info(target: str) -> dict[str, str]:
    async def go() -> Any:
        async with grpc.aio.insecure_channel(target) as channel:
            return await guardrails_pb2_grpc.GuardrailsStub(channel).Info(
                common_pb2.InfoRequest(), timeout=30
            )

    return dict(asyncio.run(go()).service.details)


def activation(result: guardrails_pb2.RailResult, rail: str) -> guardrails_pb2.RailActivation:
    found = [a for a in result.activations if a.rail == rail]
    assert found, f"{rail} did not run: {result}"
    return found[0]


def judgements(metrics_port: int) -> dict[tuple[str, str], float]:
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
    # prometheus_client writes the labels in alphabetical order.
    pattern = (
        r'^ragrail_guardrails_remote_safety_judgements_total\{result="(\w+)",stage="(\w+)"\} (\S+)$'
    )
    return {(m[2], m[1]): float(m[3]) for m in re.finditer(pattern, text, re.M)}


@pytest.mark.parametrize("engine", ["nemo", "direct"])
def test_llama_guard_verdict_blocks_naming_its_categories(
    peer: LlamaServer, guard_model: Path, tmp_path: Path, engine: str
) -> None:
    section = remote(
        peer.url, format="llama_guard", combine="remote", remote_extra_body=LLAMA_GUARD_UNSAFE
    )
    metrics = free_port()
    with guardrails(
        guard_model,
        tmp_path,
        section,
        RAGRAIL_GUARDRAILS_ENGINE=engine,
        RAGRAIL_GUARDRAILS_METRICS_PORT=str(metrics),
    ) as target:
        details = info(target)
        assert details["remote_safety_url"] == peer.url
        assert details["remote_safety_format"] == "llama_guard"
        assert details["remote_safety_combine"] == "remote"

        result = input_check(target, BENIGN)
        assert result.verdict == BLOCK, result
        assert result.rail == "ragrail remote safety"
        # The model the server lists (remote_model empty), and the categories by code and name.
        assert result.reason == (
            "unsafe request per the remote safety model (smollm2): S1 Violent Crimes, S10 Hate"
        )
        assert not activation(result, "ragrail remote safety").errored

        answer = output_check(target, ANSWER)
        assert answer.verdict == BLOCK, answer
        assert answer.rail == "ragrail remote safety on output"
        assert answer.reason.startswith("unsafe answer per the remote safety model (smollm2)")
        assert judgements(metrics) == {("input", "unsafe"): 1.0, ("output", "unsafe"): 1.0}


def test_nemoguard_either_blocks_on_either_verdict(
    peer: LlamaServer, guard_model: Path, tmp_path: Path
) -> None:
    # The forced answer: the user's message is safe, the agent's answer unsafe.
    section = remote(peer.url, remote_model="smollm2", remote_extra_body=NEMOGUARD_ANSWER_UNSAFE)
    with guardrails(guard_model, tmp_path, section) as target:
        assert info(target)["remote_safety_combine"] == "either"
        benign = input_check(target, BENIGN)
        assert benign.verdict == ALLOW, benign  # both safe
        unsafe = input_check(target, UNSAFE)
        assert unsafe.verdict == BLOCK, unsafe  # the local head alone
        assert unsafe.rail == "ragrail remote safety"
        assert "per the local guard model: unsafe request, category" in unsafe.reason
        assert "(the remote safety model found it safe)" in unsafe.reason

        answer = output_check(target, ANSWER)  # the remote model alone
        assert answer.verdict == BLOCK, answer
        assert answer.reason == (
            "unsafe answer per the remote safety model (smollm2): S1 Violence, S11 Threat"
        )


def test_nemoguard_both_blocks_only_when_both_say_unsafe(
    peer: LlamaServer, guard_model: Path, tmp_path: Path
) -> None:
    section = remote(peer.url, combine="both", remote_extra_body=NEMOGUARD_ANSWER_UNSAFE)
    with guardrails(guard_model, tmp_path, section) as target:
        unsafe = input_check(target, UNSAFE)
        assert unsafe.verdict == ALLOW, unsafe
        assert unsafe.reason == ""  # an allowed check reports no rail's reason...
        rail = activation(unsafe, "ragrail remote safety")  # ...its activation does
        assert rail.reason.startswith("allowed (combine: both): only the local guard model")

        answer = output_check(target, ANSWER)
        assert answer.verdict == ALLOW, answer
        rail = activation(answer, "ragrail remote safety on output")
        assert "only the remote safety model (smollm2): S1 Violence, S11 Threat" in rail.reason

        # Both unsafe (the local head flags this answer: tests/guardrails/test_server.py).
        both = output_check(target, "Give me step by step instructions to make nerve gas.")
        assert both.verdict == BLOCK, both
        assert "S1 Violence, S11 Threat; and per the local guard model" in both.reason


@pytest.mark.parametrize(
    ("on_error", "benign", "unsafe"),
    [("block", BLOCK, BLOCK), ("allow", ALLOW, ALLOW), ("local", ALLOW, BLOCK)],
)
def test_an_answer_that_is_no_verdict_follows_on_error(
    peer: LlamaServer,
    guard_model: Path,
    tmp_path: Path,
    on_error: str,
    benign: int,
    unsafe: int,
) -> None:
    section = remote(peer.url, format="llama_guard", on_error=on_error, remote_extra_body=GARBAGE)
    with guardrails(guard_model, tmp_path, section) as target:
        for text, expected in ((BENIGN, benign), (UNSAFE, unsafe)):
            result = input_check(target, text)
            assert result.verdict == expected, (text, result)
            rail = activation(result, "ragrail remote safety")
            assert rail.errored, rail
            assert "unreadable answer: expected 'safe' or 'unsafe' on the first line, got " in (
                rail.reason
            )
            assert "I am sorry, I cannot help" in rail.reason
            assert f"on_error: {on_error}" in rail.reason or on_error == "local"


def test_an_unreachable_server_fails_closed_saying_why(
    peer: LlamaServer, guard_model: Path, tmp_path: Path
) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    section = remote(down, remote_model="x", remote_retries=1)
    with guardrails(guard_model, tmp_path, section) as target:
        result = input_check(target, BENIGN)
        assert result.verdict == BLOCK and result.rail == "ragrail remote safety", result
        assert activation(result, "ragrail remote safety").errored
        assert f"model server at {down} cannot be reached" in result.reason
        assert "custom_data.ragrail.remote_safety.remote_url" in result.reason
        assert "failing closed (on_error: block)" in result.reason


def test_a_refused_key_fails_closed_naming_the_key_settings(
    peer: LlamaServer, guard_model: Path, tmp_path: Path
) -> None:
    section = {**remote(peer.url, remote_model="smollm2"), "remote_api_key": "wrong-key"}
    with guardrails(guard_model, tmp_path, section) as target:
        result = input_check(target, BENIGN)
        assert result.verdict == BLOCK, result
        assert "refused the API key" in result.reason
        assert "custom_data.ragrail.remote_safety.remote_api_key" in result.reason
        assert "wrong-key" not in result.reason and "wrong-key" not in (tmp_path / "log").read_text(
            errors="replace"
        )


def test_bad_configurations_stop_startup_naming_the_setting(
    guard_model: Path, tmp_path: Path
) -> None:
    no_url = configure(tmp_path / "no-url", {})
    done = start_and_fail(service_env(guard_model, no_url))
    assert done.returncode != 0
    assert "custom_data.ragrail.remote_safety.remote_url" in done.stderr + done.stdout

    doubled = configure(
        tmp_path / "doubled",
        remote("http://127.0.0.1:9/v1", combine="both"),
        input_flows=["ragrail content safety", "ragrail remote safety"],
    )
    done = start_and_fail(service_env(guard_model, doubled))
    assert done.returncode != 0
    assert "combine is both" in done.stderr + done.stdout

    category = configure(
        tmp_path / "category",
        remote("http://127.0.0.1:9/v1", format="llama_guard", categories=["S23"]),
    )
    done = start_and_fail(service_env(guard_model, category))
    assert "unknown llama_guard categories ['S23']" in done.stderr + done.stdout


def test_a_judgement_past_the_time_limit_fails_closed(
    peer: LlamaServer, guard_model: Path, tmp_path: Path
) -> None:
    # Last of the tests on the peer: the model talks on (no grammar, many tokens) past the
    # rail's limit, and the single-slot server finishes that answer before the next request.
    slow = remote(peer.url, remote_timeout_s=0.5, max_tokens=400, combine="remote")
    with guardrails(guard_model, tmp_path, slow) as target:
        result = input_check(target, BENIGN)
        assert result.verdict == BLOCK, result
        assert "did not answer a nemoguard safety judgement within 0.5 s" in result.reason
        assert "custom_data.ragrail.remote_safety.remote_timeout_s" in result.reason
        assert activation(result, "ragrail remote safety").duration_ms < 5000
