"""The openai engine against a real OpenAI-compatible server: llama-cpp-python's own
(`python -m llama_cpp.server`, tests/generator/openai_peer.py) on the packaged SmolLM2.

The generator runs as a process with RAGRAIL_GENERATOR_ENGINE=openai, with the server's chat
template (/v1/chat/completions) and with ours (/v1/completions), and its answers are compared
with the in-process llamacpp engine's on the same model. A second server, behind an API key,
is killed and restarted under a streaming request."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from services.generator.backends.base import FinishReason
from services.generator.backends.openai import OpenAIEngine
from services.generator.backends.openai_stream import StreamReader
from services.generator.chat_template import load_chat_tokenizer
from services.generator.settings import GeneratorSettings
from shared.errors import FailedPrecondition
from shared.models.generator_files import packaged_gguf
from shared.proto.ragrail.v1 import common_pb2, generator_pb2, generator_pb2_grpc
from tests.conftest import gateway_process, grpc_service
from tests.generator import calls
from tests.generator.calls import call, stream
from tests.generator.conftest import Service, count_like_llamacpp
from tests.generator.openai_peer import MODEL_ALIAS, LlamaServer, llama_server, server_missing

pytestmark = pytest.mark.integration

CONTEXT = 1024
QUESTION = [common_pb2.ChatMessage(role="user", content="Name three colours of the rainbow.")]
# Greedy, the packaged model answers this for hundreds of tokens (seconds on this CPU).
LONG = [common_pb2.ChatMessage(role="user", content="Count from 1 to 300, separated by commas.")]
PARITY = [
    [common_pb2.ChatMessage(role="user", content="What is the capital of France?")],
    [
        common_pb2.ChatMessage(role="system", content="You answer in one short sentence."),
        common_pb2.ChatMessage(role="user", content="Why is the sky blue?"),
    ],
    [common_pb2.ChatMessage(role="user", content="Write a haiku about bread.")],
]
KEY = "test-key-0123456789"


@pytest.fixture(scope="module")
def gguf() -> Path:
    missing = server_missing()
    if missing:
        pytest.skip(missing)
    return packaged_gguf()


@pytest.fixture(scope="module")
def peer(gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with llama_server(gguf, log, n_ctx=CONTEXT) as server:
        yield server


def generator_env(url: str, **extra: str) -> dict[str, str]:
    env = {
        "RAGRAIL_GENERATOR_ENGINE": "openai",
        "RAGRAIL_GENERATOR_REMOTE_URL": url,
        "RAGRAIL_GENERATOR_TOKENIZER": str(packaged_gguf()),
        "RAGRAIL_GENERATOR_CONTEXT_LENGTH": str(CONTEXT),
        "RAGRAIL_GENERATOR_REMOTE_RETRIES": "2",
        "RAGRAIL_GENERATOR_REMOTE_RETRY_BACKOFF_S": "0.2",
    }
    env.update({f"RAGRAIL_GENERATOR_{k.upper()}": v for k, v in extra.items()})
    return env


@pytest.fixture(scope="module")
def generators(
    peer: LlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """chat template ("server" or "local") -> the target of a generator on `peer`."""
    logs = tmp_path_factory.mktemp("generator-openai-logs")
    with contextlib.ExitStack() as stack:
        yield {
            template: stack.enter_context(
                grpc_service(
                    "services.generator",
                    "GENERATOR",
                    generator_env(peer.url, remote_chat_template=template),
                    logs / f"{template}.log",
                )
            )
            for template in ("server", "local")
        }


@pytest.fixture(params=["server", "local"])
def target(request: pytest.FixtureRequest, generators: dict[str, str]) -> str:
    return generators[str(request.param)]


def ask(messages: Any = None, **sampling: Any) -> generator_pb2.GenerateRequest:
    return generator_pb2.GenerateRequest(
        messages=messages or QUESTION, sampling=generator_pb2.SamplingParams(**sampling)
    )


def rpc_error(target: str, message: Any, timeout: float = 30) -> grpc.aio.AioRpcError:
    return calls.rpc_error(target, "Generate", message, timeout)


def stream_long(
    target: str, timeout: float, at_second: Callable[[Any], object], read_on: bool
) -> list[str]:
    """The pieces of a long greedy answer (LONG, 900 tokens at most) streamed from `target`:
    `at_second(call)` once the second arrives, then reading stops, or with `read_on` goes on
    to the stream's end (or its error)."""
    received: list[str] = []

    async def read() -> None:
        async with grpc.aio.insecure_channel(target) as channel:
            request = ask(LONG, temperature=0.0, max_tokens=900)
            rpc = generator_pb2_grpc.GeneratorStub(channel).GenerateStream(request, timeout=timeout)
            async for chunk in rpc:
                received.append(chunk.delta)
                if len(received) == 2:
                    at_second(rpc)
                    if not read_on:
                        break

    asyncio.run(read())
    return received


# -- without a server -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"model": "a.gguf"}, "remote_model"),
        ({"registry_model": "llm"}, "remote_model"),
        ({"remote_chat_template": "local"}, "tokenizer is empty"),
    ],
)
def test_settings_that_cannot_work_are_refused(settings: dict[str, str], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        GeneratorSettings(engine="openai", remote_url="http://127.0.0.1:1/v1", **settings)


def test_server_usage_makes_the_chunk_counts_sum_right() -> None:
    """OpenAI's and vLLM's stream with stream_options.include_usage: a role-only delta, text
    deltas (two tokens in one piece here), the finish reason, then usage with no choices."""
    stream = StreamReader()
    events: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
        {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}},
    ]
    chunks = [c for e in events for c in stream.feed(e)]
    last = stream.end()
    assert last is not None and last.finish_reason == FinishReason.LENGTH
    assert "".join(c.text for c in [*chunks, last]) == "Hello there"
    assert sum(c.tokens for c in [*chunks, last]) == 3


# -- answers ------------------------------------------------------------------------------


def test_info_names_the_remote_model_and_context(
    generators: dict[str, str], peer: LlamaServer
) -> None:
    info = call(generators["server"], "Info", common_pb2.InfoRequest(), 10)
    assert info.service.backend == "openai"
    assert info.service.model == f"{MODEL_ALIAS}@{peer.url}"
    assert info.context_length == CONTEXT
    details = dict(info.service.details)
    assert details["remote_url"] == peer.url
    assert details["chat_template"] == "server"
    assert details["context_length_from"] == "RAGRAIL_GENERATOR_CONTEXT_LENGTH"


def test_stream_arrives_in_pieces_with_usage(target: str) -> None:
    chunks = stream(target, ask(temperature=0.0, max_tokens=16))
    assert len(chunks) >= 4, [c.delta for c in chunks]
    assert all(not c.finish_reason for c in chunks[:-1])
    last = chunks[-1]
    assert last.finish_reason
    counted = call(target, "CountTokens", generator_pb2.CountTokensRequest(messages=QUESTION))
    assert last.usage.prompt_tokens == counted.prompt_tokens > 10
    assert len([c for c in chunks[:-1] if c.delta]) <= last.usage.completion_tokens <= 16
    assert last.timing.time_to_first_token_ms > 0 and last.timing.inter_token_latency_ms > 0
    text = "".join(c.delta for c in chunks)
    assert call(target, "Generate", ask(temperature=0.0, max_tokens=16)).text == text


def test_greedy_answers_match_the_llamacpp_engine(
    generators: dict[str, str], llamacpp: Any
) -> None:
    """Token for token at temperature 0, with the server's chat template and with ours."""
    for messages in PARITY:
        request = ask(messages, temperature=0.0, max_tokens=32)
        local = llamacpp.call("Generate", request)
        for template, target in generators.items():
            remote = call(target, "Generate", request)
            assert remote.text == local.text, (template, remote.text, local.text)
            assert remote.usage.completion_tokens == local.usage.completion_tokens
            assert remote.usage.prompt_tokens == local.usage.prompt_tokens
            assert remote.finish_reason == local.finish_reason


def test_max_tokens_ends_with_length(target: str) -> None:
    reply = call(target, "Generate", ask(LONG, temperature=0.0, max_tokens=6))
    assert reply.finish_reason == generator_pb2.FINISH_REASON_LENGTH
    assert reply.usage.completion_tokens == 6


def test_stop_sequence_cuts_the_answer(target: str) -> None:
    full = call(target, "Generate", ask(LONG, temperature=0.0, max_tokens=24)).text
    assert len(full) > 12, full
    stop = full[9:12]
    expected = full[: full.index(stop)]
    answer = call(target, "Generate", ask(LONG, temperature=0.0, max_tokens=24, stop=[stop]))
    assert answer.text == expected
    assert answer.finish_reason == generator_pb2.FINISH_REASON_STOP


def test_seeded_sampling_repeats_and_reaches_the_server(target: str) -> None:
    params = {"temperature": 0.9, "top_p": 0.8, "top_k": 20, "seed": 7, "max_tokens": 12}
    first = call(target, "Generate", ask(**params)).text
    assert call(target, "Generate", ask(**params)).text == first
    others = {call(target, "Generate", ask(**{**params, "seed": s})).text for s in (1, 2, 3)}
    assert len(others | {first}) > 1  # the seed reached the server's sampler


def test_count_tokens_matches_the_llamacpp_engine(
    generators: dict[str, str], llamacpp: Service
) -> None:
    message = generator_pb2.CountTokensRequest(
        messages=PARITY[1], texts=["Paris, France.", "Cats purr when they are content. 😺"]
    )
    for target in generators.values():
        assert count_like_llamacpp(target, llamacpp, message).context_length == CONTEXT


def test_server_tokenize_endpoint_counts_like_the_gguf(peer: LlamaServer) -> None:
    """Without RAGRAIL_GENERATOR_TOKENIZER, tokens come from the server's /extras/tokenize
    (llama-cpp-python), equal to the in-process tokenizer's; and the engine refuses to start
    with the server's chat template, which that server cannot count a chat with."""
    settings = GeneratorSettings(
        engine="openai", remote_url=peer.url, remote_model=MODEL_ALIAS, context_length=CONTEXT
    )
    engine = OpenAIEngine(settings)
    local = load_chat_tokenizer(str(packaged_gguf()))
    for text in ("Paris, France.", "Cats purr when they are content. 😺", ""):
        assert engine.tokenize(text, chat=False) == local.encode(text, chat=False)
    assert engine.route is not None and engine.route.path == "/extras/tokenize"

    async def start_and_close() -> None:
        try:
            await engine.start()
        finally:
            await engine.close()

    with pytest.raises(FailedPrecondition, match="RAGRAIL_GENERATOR_TOKENIZER"):
        asyncio.run(start_and_close())


def sse_lines(url: str, body: dict[str, Any]) -> list[str]:
    with httpx.stream("POST", url, json=body, timeout=60) as reply:
        assert reply.status_code == 200, reply.read()
        return [line for line in reply.iter_lines() if line.startswith("data: ")]


def test_chat_streams_through_the_gateway(generators: dict[str, str], tmp_path: Path) -> None:
    """The gateway's OpenAI endpoint, no collection: the generator's answer, streamed."""
    target = generators["server"]
    body = {"model": "any", "messages": [{"role": "user", "content": QUESTION[0].content}],
            "max_tokens": 12, "temperature": 0, "stream": True}  # fmt: skip
    with gateway_process(tmp_path / "gateway.log", generator_url=target) as url:
        lines = sse_lines(f"{url}/v1/chat/completions", body)
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[6:]) for line in lines[:-1]]
    pieces = [c["delta"].get("content") or "" for e in events for c in e.get("choices", [])]
    assert len([p for p in pieces if p]) >= 3, pieces
    assert any(c.get("finish_reason") for e in events for c in e.get("choices", []))
    direct = call(target, "Generate", ask(temperature=0.0, max_tokens=12)).text
    assert "".join(pieces).strip() == direct.strip()


# -- cancellation, deadlines ---------------------------------------------------------------


def timed_short_answer(target: str) -> float:
    started = time.monotonic()
    reply = call(target, "Generate", ask(temperature=0.0, max_tokens=4))
    assert reply.usage.completion_tokens >= 1
    return time.monotonic() - started


def test_cancelling_mid_stream_frees_the_servers_slot(
    generators: dict[str, str], peer: LlamaServer
) -> None:
    """llama-cpp-python's server answers one request at a time: a cancelled answer left
    running would hold the next request for the 900 tokens (about 12 s here)."""
    target = generators["server"]
    received = stream_long(target, 60, lambda rpc: rpc.cancel(), read_on=False)
    assert len(received) == 2
    assert timed_short_answer(target) < 5.0
    assert "disconnected" in peer.log_text().lower()
    details = call(target, "Info", common_pb2.InfoRequest(), 10).service.details
    assert details["running"] == "0"


def test_deadline_is_deadline_exceeded_and_frees_the_slot(generators: dict[str, str]) -> None:
    target = generators["local"]
    started = time.monotonic()
    error = rpc_error(target, ask(LONG, temperature=0.0, max_tokens=900), timeout=1.0)
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 3
    assert timed_short_answer(target) < 5.0


# -- the server down, restarted, or refusing the key ----------------------------------------


@dataclass
class Guarded:
    server: LlamaServer
    target: str  # a generator with the right key (from a file)
    wrong_key: str  # a generator with a wrong key


@pytest.fixture(scope="module")
def guarded(gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    root = tmp_path_factory.mktemp("llama-server-guarded")
    key_file = root / "key"
    key_file.write_text(KEY + "\n")
    # The model name and context length are settings, so a generator starts (and serves
    # errors) while the server is down or refuses it.
    known = {"remote_model": MODEL_ALIAS}
    with llama_server(gguf, root / "server.log", n_ctx=CONTEXT, api_key=KEY) as server:
        right = generator_env(server.url, remote_api_key_file=str(key_file), **known)
        wrong = generator_env(server.url, remote_api_key="not-the-key", **known)
        with (
            grpc_service("services.generator", "GENERATOR", right, root / "right.log") as a,
            grpc_service("services.generator", "GENERATOR", wrong, root / "wrong.log") as b,
        ):
            yield Guarded(server, a, b)


def test_wrong_api_key_is_unavailable_saying_so(guarded: Guarded) -> None:
    error = rpc_error(guarded.wrong_key, ask(max_tokens=4))
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    details = error.details() or ""
    assert "refused the API key" in details and guarded.server.url in details
    assert "RAGRAIL_GENERATOR_REMOTE_API_KEY" in details
    assert "Traceback" not in details and "not-the-key" not in details
    assert call(guarded.target, "Generate", ask(max_tokens=4)).text  # the right key works


def test_server_killed_mid_stream_is_unavailable_then_recovers(guarded: Guarded) -> None:
    server, target = guarded.server, guarded.target
    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        stream_long(target, 30, lambda rpc: server.kill(), read_on=True)
    assert time.monotonic() - started < 10  # no hung stream
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert server.url in (caught.value.details() or "")
    # Down: retried twice (0.2 s, 0.4 s), then UNAVAILABLE naming the server.
    error = rpc_error(target, ask(max_tokens=4), timeout=10)
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert server.url in (error.details() or "")
    server.start()
    back = time.monotonic()
    assert call(target, "Generate", ask(temperature=0.0, max_tokens=4)).text
    assert time.monotonic() - back < 10
