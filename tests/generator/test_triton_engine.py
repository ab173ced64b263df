"""The triton engine against a real Triton server (nvidia-pytriton's tritonserver on CPU).

The generator runs as a process with RAGRAIL_GENERATOR_ENGINE=triton, once per tensor
protocol: `llmapi` against a model loaded from deploy/triton's config.pbtxt and model.yaml,
`ensemble` against a model with the inflight_batcher_llm ensemble's tensors. Both models
generate with llama.cpp on the packaged SmolLM2 (tests/generator/triton_server.py), and
record every request they finished, so the tests see what reached Triton and how it ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest
import yaml

from shared.models.generator_files import packaged_gguf
from shared.proto.ragrail.v1 import common_pb2, generator_pb2, generator_pb2_grpc
from tests.conftest import REPO, free_port, grpc_service
from tests.generator import calls
from tests.generator.calls import rpc_error
from tests.generator.conftest import Service, count_like_llamacpp
from tests.generator.triton_server import TritonPeer, pytriton_missing, triton_peer

pytestmark = pytest.mark.integration

PROTOCOLS = ("llmapi", "ensemble")
QUESTION = [common_pb2.ChatMessage(role="user", content="Name three colours of the rainbow.")]
# Greedy, the packaged model answers this for hundreds of tokens (seconds on this CPU).
LONG = [common_pb2.ChatMessage(role="user", content="Count from 1 to 100, separated by commas.")]


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonPeer]:
    missing = pytriton_missing()
    if missing:
        pytest.skip(missing)
    with triton_peer(tmp_path_factory.mktemp("triton"), packaged_gguf()) as server:
        yield server


def generator_env(url: str, protocol: str, **extra: str) -> dict[str, str]:
    env = {
        "RAGRAIL_GENERATOR_ENGINE": "triton",
        "RAGRAIL_GENERATOR_TRITON_URL": url,
        "RAGRAIL_GENERATOR_TRITON_PROTOCOL": protocol,
        "RAGRAIL_GENERATOR_CONTEXT_LENGTH": "2048",
    }
    env.update({f"RAGRAIL_GENERATOR_{k.upper()}": v for k, v in extra.items()})
    return env


@dataclass
class Generator:
    target: str
    metrics_port: int

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).text


@pytest.fixture(scope="module")
def generators(
    peer: TritonPeer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Generator]]:
    """protocol -> a generator service talking to the Triton server with that protocol."""
    logs = tmp_path_factory.mktemp("generator-triton-logs")
    ports = {p: free_port() for p in PROTOCOLS}
    with contextlib.ExitStack() as stack:
        services = {
            protocol: Generator(
                stack.enter_context(
                    grpc_service(
                        "services.generator",
                        "GENERATOR",
                        generator_env(peer.url, protocol, metrics_port=str(ports[protocol])),
                        logs / f"{protocol}.log",
                    )
                ),
                ports[protocol],
            )
            for protocol in PROTOCOLS
        }
        yield services


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def call(target: str, method: str, message: Any, timeout: float = 120) -> Any:
    return calls.call(target, method, message, timeout)


def stream(target: str, message: Any, timeout: float = 120) -> list[generator_pb2.GenerateChunk]:
    return calls.stream(target, message, timeout)


def ask(messages: Any = None, **sampling: Any) -> generator_pb2.GenerateRequest:
    """A request with its own id, which the engine passes to Triton as the request id."""
    return generator_pb2.GenerateRequest(
        messages=messages or QUESTION,
        sampling=generator_pb2.SamplingParams(**sampling),
        request_id=f"test-{uuid.uuid4().hex[:12]}",
    )


# -- answers ------------------------------------------------------------------------------


def test_info_names_triton_and_its_model(
    generators: dict[str, Generator], peer: TritonPeer
) -> None:
    for protocol, model in (("llmapi", "tensorrt_llm"), ("ensemble", "ensemble")):
        info = call(generators[protocol].target, "Info", common_pb2.InfoRequest(), 10)
        assert info.service.backend == "triton"
        assert info.service.model == f"{model}@{peer.url}"
        details = dict(info.service.details)
        assert details["triton_protocol"] == protocol
        assert details["tokenizer"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
        assert info.context_length == 2048


def test_unary_answer_reaches_triton_and_reports_usage(
    generators: dict[str, Generator], peer: TritonPeer, protocol: str
) -> None:
    target = generators[protocol].target
    request = ask(temperature=0.0, max_tokens=12)
    reply = call(target, "Generate", request)
    assert reply.text.strip()
    assert reply.finish_reason in (
        generator_pb2.FINISH_REASON_STOP,
        generator_pb2.FINISH_REASON_LENGTH,
    )
    counted = call(target, "CountTokens", generator_pb2.CountTokensRequest(messages=QUESTION))
    assert reply.usage.prompt_tokens == counted.prompt_tokens > 10
    assert 1 <= reply.usage.completion_tokens <= 12
    assert reply.timing.time_to_first_token_ms > 0
    assert reply.timing.total_ms >= reply.timing.time_to_first_token_ms
    event = peer.events_for(request.request_id)
    assert event["model"] == ("tensorrt_llm" if protocol == "llmapi" else "ensemble")
    assert event["sampling"]["max_tokens"] == 12
    # Greedy goes out as temperature 0 and top_k 1.
    assert event["sampling"]["temperature"] == 0.0 and event["sampling"]["top_k"] == 1
    assert event["pieces"] == reply.usage.completion_tokens


def test_prompt_is_counted_like_the_llamacpp_engine(
    generators: dict[str, Generator], llamacpp: Service
) -> None:
    """Without RAGRAIL_GENERATOR_TOKENIZER the engine renders and counts with the packaged
    GGUF's template and vocabulary, as the llamacpp engine does with that model."""
    message = generator_pb2.CountTokensRequest(messages=QUESTION, texts=["Paris, France."])
    count_like_llamacpp(generators["llmapi"].target, llamacpp, message)


def test_stream_arrives_in_pieces_and_matches_the_unary_answer(
    generators: dict[str, Generator], protocol: str
) -> None:
    target = generators[protocol].target
    chunks = stream(target, ask(temperature=0.0, max_tokens=16))
    assert len(chunks) >= 4, [c.delta for c in chunks]
    assert all(not c.finish_reason for c in chunks[:-1])
    last = chunks[-1]
    assert last.finish_reason
    text = "".join(c.delta for c in chunks)
    assert last.usage.completion_tokens >= len([c for c in chunks[:-1] if c.delta])
    assert last.timing.inter_token_latency_ms > 0
    # Greedy: the same text as one piece.
    assert call(target, "Generate", ask(temperature=0.0, max_tokens=16)).text == text


def test_max_tokens_ends_with_length(
    generators: dict[str, Generator], peer: TritonPeer, protocol: str
) -> None:
    request = ask(temperature=0.0, max_tokens=6)
    reply = call(generators[protocol].target, "Generate", request)
    assert reply.finish_reason == generator_pb2.FINISH_REASON_LENGTH
    assert reply.usage.completion_tokens == 6
    assert peer.events_for(request.request_id)["end"] == "length"


def test_stop_sequence_cuts_the_answer_and_reaches_triton(
    generators: dict[str, Generator], peer: TritonPeer, protocol: str
) -> None:
    target = generators[protocol].target
    full = call(target, "Generate", ask(temperature=0.0, max_tokens=24)).text
    words = full.split()
    assert len(words) >= 4, full
    stop = words[2]
    expected = full[: full.index(stop)]
    request = ask(temperature=0.0, max_tokens=24, stop=[stop])
    answer = call(target, "Generate", request)
    assert answer.text == expected
    assert answer.finish_reason == generator_pb2.FINISH_REASON_STOP
    chunks = stream(target, ask(temperature=0.0, max_tokens=24, stop=[stop]))
    assert "".join(c.delta for c in chunks) == expected
    assert chunks[-1].finish_reason == generator_pb2.FINISH_REASON_STOP
    event = peer.events_for(request.request_id)
    assert event["sampling"]["stop"] == [stop]  # llmapi: sampling_param_stop; ensemble: stop_words
    assert event["end"] == "stop"


def test_sampling_parameters_reach_triton(
    generators: dict[str, Generator], peer: TritonPeer, protocol: str
) -> None:
    target = generators[protocol].target
    params = {"temperature": 0.9, "top_p": 0.8, "top_k": 20, "seed": 7, "max_tokens": 10}
    first = call(target, "Generate", request := ask(**params))
    assert call(target, "Generate", ask(**params)).text == first.text  # same seed, same text
    sampling = peer.events_for(request.request_id)["sampling"]
    assert sampling["temperature"] == pytest.approx(0.9)
    assert sampling["top_p"] == pytest.approx(0.8)
    assert (sampling["top_k"], sampling["seed"], sampling["max_tokens"]) == (20, 7, 10)


def test_repetition_penalty_goes_where_the_model_has_an_input(
    generators: dict[str, Generator], peer: TritonPeer
) -> None:
    # The ensemble has a repetition_penalty input; the llmapi model has none.
    request = ask(temperature=0.0, max_tokens=4, repetition_penalty=1.3)
    call(generators["ensemble"].target, "Generate", request)
    penalty = peer.events_for(request.request_id)["sampling"]["repetition_penalty"]
    assert penalty == pytest.approx(1.3)
    error = rpc_error(generators["llmapi"].target, "Generate", ask(repetition_penalty=1.3))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "sampling.repetition_penalty" in (error.details() or "")


# -- cancellation, deadlines, failures ---------------------------------------------------


def wait_idle(target: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        details = call(target, "Info", common_pb2.InfoRequest(), 10).service.details
        if details["running"] == "0":
            return
        time.sleep(0.1)
    pytest.fail(f"the triton engine still has requests running after {timeout} s")


def test_client_cancelling_mid_stream_ends_the_triton_request(
    generators: dict[str, Generator], peer: TritonPeer, protocol: str
) -> None:
    target = generators[protocol].target
    request = ask(LONG, temperature=0.0, max_tokens=400)
    received: list[str] = []

    async def read_two_then_cancel() -> None:
        async with grpc.aio.insecure_channel(target) as channel:
            call = generator_pb2_grpc.GeneratorStub(channel).GenerateStream(request, timeout=120)
            async for chunk in call:
                received.append(chunk.delta)
                if len(received) == 2:
                    call.cancel()
                    break

    started = time.monotonic()
    asyncio.run(read_two_then_cancel())
    assert len(received) == 2
    event = peer.events_for(request.request_id, timeout=20)
    assert event["end"] == "cancelled"
    assert event["pieces"] < 400
    assert time.monotonic() - started < 20
    wait_idle(target)


def test_deadline_answers_deadline_exceeded_and_ends_the_triton_request(
    generators: dict[str, Generator], peer: TritonPeer, protocol: str
) -> None:
    request = ask(LONG, temperature=0.0, max_tokens=400)
    started = time.monotonic()
    error = rpc_error(generators[protocol].target, "Generate", request, timeout=1.5)
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 5
    assert peer.events_for(request.request_id, timeout=20)["end"] == "cancelled"
    wait_idle(generators[protocol].target)


def test_deadline_before_the_first_token_ends_the_triton_request(
    generators: dict[str, Generator], peer: TritonPeer
) -> None:
    """A long prompt keeps the model reading it past a 0.5 s deadline (llama.cpp reads at
    most about 150 tokens/s on this CPU): the stream is cancelled while the engine still
    waits for its first response."""
    # 40 sentences (about 560 tokens), led by text no earlier prompt shared: 12 (about 170
    # tokens) were once read, and a first piece sent, inside the 0.5 s.
    passage = f"Request {time.time_ns()}. " + " ".join(
        f"Sentence {i} of a long passage about rivers and their deltas." for i in range(40)
    )
    long_question = [common_pb2.ChatMessage(role="user", content=passage + " Summarise it.")]
    target = generators["llmapi"].target
    counted = call(target, "CountTokens", generator_pb2.CountTokensRequest(messages=long_question))
    assert counted.prompt_tokens > 150
    request = ask(long_question, temperature=0.0, max_tokens=50)
    started = time.monotonic()
    error = rpc_error(target, "Generate", request, timeout=0.5)
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 3
    event = peer.events_for(request.request_id, timeout=60)
    assert event["end"] == "cancelled" and event["pieces"] == 0
    wait_idle(target)


def test_cancellations_show_in_metrics(generators: dict[str, Generator]) -> None:
    async def cancel_after_first(target: str) -> None:
        async with grpc.aio.insecure_channel(target) as channel:
            call = generator_pb2_grpc.GeneratorStub(channel).GenerateStream(
                ask(LONG, max_tokens=200), timeout=60
            )
            async for _ in call:
                call.cancel()
                break

    generator = generators["llmapi"]
    asyncio.run(cancel_after_first(generator.target))
    wait_idle(generator.target)
    text = generator.metrics()
    cancelled = [
        line
        for line in text.splitlines()
        if line.startswith('ragrail_generator_cancelled_total{engine="triton"}')
    ]
    assert cancelled and float(cancelled[0].split()[-1]) >= 1, text[-2000:]
    assert 'ragrail_generator_running_requests{engine="triton"} 0.0' in text


@pytest.fixture(scope="module")
def unreachable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(generator target, Triton URL) for a generator whose Triton is not running: it starts
    and serves all the same."""
    url = f"127.0.0.1:{free_port()}"  # nothing listens there
    env = generator_env(url, "llmapi", triton_retries="2", triton_retry_backoff_s="0.2")
    log = tmp_path_factory.mktemp("generator-triton-down") / "generator.log"
    with grpc_service("services.generator", "GENERATOR", env, log) as target:
        yield target, url


def test_triton_down_is_unavailable_naming_its_url(unreachable: tuple[str, str]) -> None:
    target, url = unreachable
    started = time.monotonic()
    error = rpc_error(target, "Generate", ask(max_tokens=4), timeout=10)
    elapsed = time.monotonic() - started
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert url in (error.details() or "")
    # Two retries, 0.2 s then 0.4 s apart, well inside the 10 s deadline.
    assert 0.5 < elapsed < 5
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        stream(target, ask(max_tokens=4), timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


def test_triton_down_within_a_short_deadline_is_deadline_exceeded(
    unreachable: tuple[str, str],
) -> None:
    # Retries stop at the deadline instead of overrunning it.
    started = time.monotonic()
    error = rpc_error(unreachable[0], "Generate", ask(max_tokens=4), timeout=0.3)
    assert error.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
    assert time.monotonic() - started < 2


def test_triton_that_never_answers_is_unavailable_after_its_timeout(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A host that takes the connection but says nothing (a hung server, a black hole):
    TRITON_TIMEOUT_S bounds the wait, well before the client's deadline."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes connections; nothing ever answers
        url = f"127.0.0.1:{silent.getsockname()[1]}"
        env = generator_env(url, "llmapi", triton_timeout_s="1", triton_retries="0")
        log = tmp_path_factory.mktemp("generator-triton-silent") / "generator.log"
        with grpc_service("services.generator", "GENERATOR", env, log) as target:
            started = time.monotonic()
            error = rpc_error(target, "Generate", ask(max_tokens=4), timeout=20)
            elapsed = time.monotonic() - started
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert "did not answer within 1 s" in (error.details() or "")
    assert url in (error.details() or "")
    assert elapsed < 5


@pytest.mark.parametrize(
    ("protocol", "model", "named"),
    [
        pytest.param(
            "llmapi",
            "no_such_model",
            ["no_such_model", "RAGRAIL_GENERATOR_TRITON_MODEL"],
            id="unknown_model",
        ),
        # The ensemble protocol pointed at the llmapi model: told, not sent garbage.
        pytest.param(
            "ensemble", "tensorrt_llm", ["RAGRAIL_GENERATOR_TRITON_PROTOCOL"], id="wrong_protocol"
        ),
    ],
)
def test_a_model_it_cannot_use_is_failed_precondition(
    peer: TritonPeer,
    tmp_path_factory: pytest.TempPathFactory,
    protocol: str,
    model: str,
    named: list[str],
) -> None:
    env = generator_env(peer.url, protocol, triton_model=model)
    log = tmp_path_factory.mktemp(f"generator-triton-{protocol}") / "generator.log"
    with grpc_service("services.generator", "GENERATOR", env, log) as target:
        error = rpc_error(target, "Generate", ask(max_tokens=4))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    for text in named:
        assert text in (error.details() or "")


def test_compose_healthcheck_reads_triton_readiness(peer: TritonPeer) -> None:
    """compose.yaml's healthcheck of the triton service, run against this real server (its
    HTTP port instead of localhost:8000): healthy when ready, unhealthy when nothing serves."""
    compose = yaml.safe_load((REPO / "compose.yaml").read_text(encoding="utf-8"))
    test = compose["services"]["triton"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python3", "-c"]

    def check(port: int) -> int:
        code = test[3].replace("localhost:8000", f"127.0.0.1:{port}")
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30)
        return run.returncode

    assert check(peer.http_port) == 0
    assert check(free_port()) != 0


# -- validation stays the servicer's -------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (generator_pb2.GenerateRequest(), "messages"),
        (ask(top_p=0.0), "sampling.top_p"),
        (ask(temperature=3.0), "sampling.temperature"),
        (ask(max_tokens=5000), "sampling.max_tokens"),
        (ask(stop=[""]), "sampling.stop[0]"),
        (
            ask([common_pb2.ChatMessage(role="robot", content="hi")]),
            "messages[0].role",
        ),
    ],
)
def test_invalid_requests_are_invalid_argument(
    generators: dict[str, Generator], message: Any, field: str
) -> None:
    for method in ("Generate", "GenerateStream"):
        if method == "Generate":
            error = rpc_error(generators["llmapi"].target, method, message)
        else:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                stream(generators["llmapi"].target, message)
            error = caught.value
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
        assert field in (error.details() or "")


def test_usage_and_timing_totals_in_info(generators: dict[str, Generator]) -> None:
    target = generators["ensemble"].target
    call(target, "Generate", ask(temperature=0.0, max_tokens=3))
    details = call(target, "Info", common_pb2.InfoRequest(), 10).service.details
    assert int(details["requests_served"]) >= 1
    assert int(details["completion_tokens_total"]) >= 1
    assert float(details["mean_time_to_first_token_ms"]) > 0
