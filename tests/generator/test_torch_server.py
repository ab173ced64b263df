"""The torch engine as a process over gRPC, on a Hugging Face directory made from the packaged
GGUF: answers, batching that gives each request the answer it gets alone, seeds, the same
prompt tokens as llama.cpp, and a peft LoRA adapter that loads and changes the answers."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from shared.proto.ragrail.v1 import common_pb2, generator_pb2, generator_pb2_grpc
from tests.generator.conftest import (
    QUESTION,
    Service,
    TorchModels,
    count_like_llamacpp,
    request,
)

pytestmark = pytest.mark.integration

QUESTIONS = [
    "What is the capital of France?",
    "Name three colors.",
    "Write one sentence about the sea and the wind over it.",
]


def chat(text: str) -> list[common_pb2.ChatMessage]:
    return [common_pb2.ChatMessage(role="user", content=text)]


def test_info_and_a_streamed_answer(
    torch_services: dict[str, Service], torch_models: TorchModels
) -> None:
    base = torch_services["base"]
    info = base.info()
    assert info.service.backend == "torch"
    assert info.service.model == str(torch_models.model)
    assert info.service.details["device"] == "cpu"
    assert info.service.details["dtype"] == "float32"
    assert "adapter" not in info.service.details
    chunks = base.stream(request(temperature=0, max_tokens=8))
    assert "".join(c.delta for c in chunks).strip()
    last = chunks[-1]
    assert last.finish_reason in (
        generator_pb2.FINISH_REASON_LENGTH,
        generator_pb2.FINISH_REASON_STOP,
    )
    assert 1 <= last.usage.completion_tokens <= 8
    assert last.timing.time_to_first_token_ms > 0


def test_batched_requests_get_the_answers_they_get_alone(
    torch_services: dict[str, Service],
) -> None:
    """Different prompt lengths share one left-padded KV cache; greedy answers must not move."""
    base = torch_services["base"]
    alone = [base.generate(chat(q), temperature=0, max_tokens=8).text for q in QUESTIONS]

    async def together() -> list[str]:
        async with grpc.aio.insecure_channel(base.target) as channel:
            stub = generator_pb2_grpc.GeneratorStub(channel)
            replies = await asyncio.gather(
                *(
                    stub.Generate(request(chat(q), temperature=0, max_tokens=8), timeout=120)
                    for q in QUESTIONS
                )
            )
        return [r.text for r in replies]

    assert asyncio.run(together()) == alone
    assert 'ragrail_generator_batch_size_bucket{engine="torch",le="2.0"}' in base.metrics()


def test_same_seed_same_answer(torch_services: dict[str, Service]) -> None:
    base = torch_services["base"]
    sampled = {"temperature": 1.0, "top_p": 0.9, "top_k": 40, "max_tokens": 8, "seed": 7}
    assert base.generate(**sampled).text == base.generate(**sampled).text
    penalised = base.generate(repetition_penalty=1.5, **sampled)
    assert penalised.usage.completion_tokens >= 1


def test_prompt_tokens_match_llamacpp(
    torch_services: dict[str, Service], llamacpp: Service
) -> None:
    """Both engines render the model's own chat template and tokenize it the same way, so
    the gateway's budget does not depend on the engine."""
    ask = generator_pb2.CountTokensRequest(messages=QUESTION, texts=["Paris is in France."])
    count_like_llamacpp(torch_services["base"].target, llamacpp, ask)


def test_lora_adapter_loads_and_changes_the_answer(
    torch_services: dict[str, Service], torch_models: TorchModels
) -> None:
    base, lora = torch_services["base"], torch_services["lora"]
    assert lora.info().service.details["adapter"] == str(torch_models.adapter)
    answers = {
        name: [service.generate(chat(q), temperature=0, max_tokens=8).text for q in QUESTIONS]
        for name, service in (("base", base), ("lora", lora))
    }
    assert answers["lora"] != answers["base"], answers
