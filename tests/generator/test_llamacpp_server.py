"""The generator with its default engine (llama.cpp on the packaged SmolLM2-135M-Instruct), as
a process over gRPC: unary and streaming answers, stop strings, sampling checks, seeds,
max_tokens, CountTokens, Info, health, metrics, a full queue, deadlines and cancellation."""

from __future__ import annotations

import asyncio
import re
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2

from shared.proto.ragrail.v1 import common_pb2, generator_pb2, generator_pb2_grpc
from tests.generator.conftest import (
    CONTEXT_LENGTH,
    MAX_BATCH_SIZE,
    QUESTION,
    QUEUE_SIZE,
    Service,
    request,
)
from tests.grpc_calls import health_and_services

pytestmark = pytest.mark.integration
LENGTH = generator_pb2.FINISH_REASON_LENGTH
STOP = generator_pb2.FINISH_REASON_STOP


def test_health_reflection_and_info(llamacpp: Service) -> None:
    status, names = health_and_services(llamacpp.target, "ragrail.v1.Generator")
    assert status == health_pb2.HealthCheckResponse.SERVING
    assert "ragrail.v1.Generator" in names
    info = llamacpp.info()
    assert info.service.service == "generator" and info.service.backend == "llamacpp"
    assert info.service.model.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert info.context_length == CONTEXT_LENGTH
    assert info.max_output_tokens == CONTEXT_LENGTH - 1  # capped by the window
    details = info.service.details
    assert details["threads"] == "1" and details["max_batch_size"] == str(MAX_BATCH_SIZE)


def test_unary_answer_with_usage_and_timing(llamacpp: Service) -> None:
    reply = llamacpp.generate(temperature=0, max_tokens=8)
    assert reply.text.strip()
    assert reply.model.endswith(".gguf")
    assert reply.finish_reason in (LENGTH, STOP)
    assert 1 <= reply.usage.completion_tokens <= 8
    counted = llamacpp.call("CountTokens", generator_pb2.CountTokensRequest(messages=QUESTION))
    assert reply.usage.prompt_tokens == counted.prompt_tokens > 10  # template + question
    timing = reply.timing
    assert 0 < timing.time_to_first_token_ms <= timing.total_ms
    if reply.usage.completion_tokens > 1:
        assert timing.inter_token_latency_ms > 0


def test_stream_equals_unary_and_only_the_last_chunk_finishes(llamacpp: Service) -> None:
    unary = llamacpp.generate(temperature=0, max_tokens=10)
    chunks = llamacpp.stream(request(temperature=0, max_tokens=10))
    assert len(chunks) > 2
    assert "".join(c.delta for c in chunks) == unary.text
    assert all(c.finish_reason == generator_pb2.FINISH_REASON_UNSPECIFIED for c in chunks[:-1])
    assert not any(c.HasField("usage") for c in chunks[:-1])
    last = chunks[-1]
    assert last.finish_reason == unary.finish_reason
    assert last.usage == unary.usage
    assert last.timing.time_to_first_token_ms > 0


def test_max_tokens_bounds_the_answer(llamacpp: Service) -> None:
    one = llamacpp.generate(temperature=0, max_tokens=1)
    assert one.usage.completion_tokens == 1 and one.finish_reason == LENGTH
    longer = llamacpp.generate(temperature=0, max_tokens=6)
    assert longer.text.startswith(one.text)


def test_stop_string_ends_the_answer_before_it(llamacpp: Service) -> None:
    full = llamacpp.generate(temperature=0, max_tokens=12).text
    words = full.split()
    assert len(words) >= 3, full
    stop = words[2]
    cut = llamacpp.generate(temperature=0, max_tokens=12, stop=["@@never@@", stop])
    assert cut.finish_reason == STOP
    assert cut.text == full[: full.index(stop)]
    streamed = llamacpp.stream(request(temperature=0, max_tokens=12, stop=[stop]))
    assert "".join(c.delta for c in streamed) == cut.text
    assert streamed[-1].finish_reason == STOP


def test_same_seed_same_answer(llamacpp: Service) -> None:
    sampled = {"temperature": 1.2, "top_p": 0.95, "top_k": 50, "max_tokens": 12}
    first = llamacpp.generate(seed=42, **sampled).text
    assert llamacpp.generate(seed=42, **sampled).text == first
    others = {llamacpp.generate(seed=seed, **sampled).text for seed in (1, 2, 3)}
    assert others - {first}, "different seeds should give some different answer"
    penalised = llamacpp.generate(seed=42, repetition_penalty=1.3, **sampled)
    assert penalised.usage.completion_tokens >= 1


@pytest.mark.parametrize(
    ("sampling", "messages", "message"),
    [
        ({"temperature": 2.5}, None, r"sampling\.temperature is 2\.5"),
        ({"top_p": 0.0}, None, r"sampling\.top_p is 0"),
        ({"top_k": -3}, None, r"sampling\.top_k is -3"),
        ({"repetition_penalty": 3.0}, None, r"sampling\.repetition_penalty is 3"),
        ({"max_tokens": 0}, None, r"sampling\.max_tokens is 0"),
        ({"max_tokens": CONTEXT_LENGTH}, None, r"sampling\.max_tokens is 1024 but the prompt"),
        ({"stop": [""]}, None, r"sampling\.stop\[0\] is empty"),
        ({}, [common_pb2.ChatMessage(role="wizard", content="hi")], r"messages\[0\]\.role"),
    ],
)
@pytest.mark.parametrize("method", ["Generate", "GenerateStream"])
def test_bad_requests_are_invalid_argument_naming_the_field(
    llamacpp: Service, method: str, sampling: dict, messages: list | None, message: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        if method == "Generate":
            llamacpp.generate(messages, **sampling)
        else:
            llamacpp.stream(request(messages, **sampling))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert re.search(message, caught.value.details()), caught.value.details()


def test_count_tokens(llamacpp: Service) -> None:
    reply = llamacpp.call(
        "CountTokens",
        generator_pb2.CountTokensRequest(
            messages=QUESTION, texts=["hello world", "", "Paris " * 50]
        ),
    )
    assert reply.context_length == CONTEXT_LENGTH
    assert reply.prompt_tokens > 10
    hello, empty, paris = reply.text_tokens
    assert hello == 2 and empty == 0 and 50 <= paris <= 101
    only_texts = llamacpp.call("CountTokens", generator_pb2.CountTokensRequest(texts=["a"]))
    assert only_texts.prompt_tokens == 0 and list(only_texts.text_tokens) == [1]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        llamacpp.call("CountTokens", generator_pb2.CountTokensRequest())
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_concurrent_requests_are_batched(llamacpp: Service) -> None:
    def batched_steps() -> float:
        text = llamacpp.metrics()
        found = re.search(
            r'ragrail_generator_batch_size_bucket\{engine="llamacpp",le="1\.0"\} (\S+)', text
        )
        total = re.search(r'ragrail_generator_batch_size_count\{engine="llamacpp"\} (\S+)', text)
        assert found and total
        return float(total[1]) - float(found[1])

    before = batched_steps()

    async def go() -> list[generator_pb2.GenerateResponse]:
        async with grpc.aio.insecure_channel(llamacpp.target) as channel:
            stub = generator_pb2_grpc.GeneratorStub(channel)
            return await asyncio.gather(
                *(stub.Generate(request(temperature=0, max_tokens=12), timeout=120) for _ in "ab")
            )

    replies = asyncio.run(go())
    assert replies[0].text == replies[1].text  # greedy, same prompt, in one batch
    assert batched_steps() > before, "no step advanced two requests together"


def test_full_queue_is_resource_exhausted_and_cancelled_streams_free_their_slots(
    llamacpp: Service,
) -> None:
    long_answer = request(temperature=1.0, max_tokens=CONTEXT_LENGTH // 2, seed=1)

    async def go() -> grpc.aio.AioRpcError:
        async with grpc.aio.insecure_channel(llamacpp.target) as channel:
            stub = generator_pb2_grpc.GeneratorStub(channel)
            calls = [stub.GenerateStream(long_answer, timeout=120) for _ in range(MAX_BATCH_SIZE)]
            for call in calls:
                await call.read()  # generating
            queued = [stub.GenerateStream(long_answer, timeout=120) for _ in range(QUEUE_SIZE)]
            deadline = time.monotonic() + 30
            while (await stub.Info(common_pb2.InfoRequest(), timeout=5)).service.details[
                "waiting"
            ] != str(QUEUE_SIZE):
                assert time.monotonic() < deadline, "the extra request never queued"
                await asyncio.sleep(0.05)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Generate(long_answer, timeout=30)
            for call in calls + queued:
                call.cancel()
            return caught.value

    error = asyncio.run(go())
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "RAGRAIL_GENERATOR_QUEUE_SIZE=1" in error.details(), error.details()
    llamacpp.wait_idle()  # the cancelled streams stopped generating
    assert re.search(
        r'ragrail_generator_cancelled_total\{engine="llamacpp"\} [1-9]', llamacpp.metrics()
    )
    assert re.search(
        r'ragrail_generator_rejected_total\{engine="llamacpp"\} [1-9]', llamacpp.metrics()
    )


def test_deadline_is_honoured_and_stops_the_work(llamacpp: Service) -> None:
    started = time.monotonic()
    # A prompt no earlier request shared (the engine caches prefixes: a cached prompt's first
    # token came so fast that a sampled early end of sequence beat the deadline) and long
    # enough that evaluating it alone takes well over the 0.1 s deadline, which always fires.
    prompt = f"Request {time.time_ns()}. " + "Describe the river Rhine in detail. " * 40
    slow = [common_pb2.ChatMessage(role="user", content=prompt)]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        llamacpp.call(
            "Generate", request(slow, temperature=1.0, max_tokens=CONTEXT_LENGTH // 2), 0.1
        )
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 5
    llamacpp.wait_idle()
    assert llamacpp.generate(temperature=0, max_tokens=2).usage.completion_tokens >= 1


def test_metrics_report_tokens_and_latencies(llamacpp: Service) -> None:
    llamacpp.generate(temperature=0, max_tokens=4)
    text = llamacpp.metrics()
    for name in (
        "ragrail_generator_prompt_tokens_total",
        "ragrail_generator_completion_tokens_total",
        "ragrail_generator_time_to_first_token_seconds_count",
        "ragrail_generator_inter_token_latency_seconds_count",
    ):
        found = re.search(rf'{name}\{{engine="llamacpp"\}} (\S+)', text)
        assert found and float(found[1]) > 0, name
    details = llamacpp.info().service.details
    assert int(details["requests_served"]) > 0
    assert float(details["mean_time_to_first_token_ms"]) > 0
