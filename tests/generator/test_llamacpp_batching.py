"""Multi-sequence batching and prefix caching in the llamacpp engine, in process, on the
packaged SmolLM2-135M: requests decoded together in one llama_decode, reusing the KV cache of
a common system prompt (from a running request or a slot's kept prompt), answer exactly what
each answers alone on an engine that shares nothing (greedy, with a repetition penalty, and
sampled with a seed)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest

from services.generator.backends.base import GenerationRequest, Message, Sampling
from services.generator.backends.llamacpp import FA_TILE_ROWS, LlamaCppEngine, common_prefix
from services.generator.settings import GeneratorSettings

pytestmark = pytest.mark.integration

# A shared system prompt long enough that reading it once matters (~150 tokens), then
# questions of different lengths, so the requests end at different steps.
SYSTEM = (
    "You are a helpful assistant. Answer the question using only the numbered sources below. "
    "Cite the sources you use as [1], [2]. If the sources do not contain the answer, say that "
    "you do not know.\n\nSources:\n\n[1] honeybee-colonies.md\nA honeybee colony has one "
    "queen, thousands of female workers and, in summer, a few hundred male drones. Foragers "
    "that find nectar return to the hive and perform a waggle dance: the angle of the run "
    "against the vertical gives the direction of the food relative to the sun, and its length "
    "gives the distance.\n\n[2] sourdough-baking.txt\nA sourdough starter is flour and water "
    "fermented by wild yeasts and lactic acid bacteria."
)
QUESTIONS = [
    "How do honeybees tell each other where food is?",
    "What is in a sourdough starter?",
    "Who lives in a honeybee colony, and how many of each?",
    "What does the angle of the waggle run mean?",
]


def settings(**overrides: object) -> GeneratorSettings:
    values: dict[str, object] = dict(
        threads=1, max_batch_size=4, context_length=1024, kv_cache_tokens=4096
    )
    values.update(overrides)
    return GeneratorSettings(**values)  # type: ignore[arg-type]


@contextlib.contextmanager
def running(engine: LlamaCppEngine) -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    loop.run_until_complete(engine.start())
    try:
        yield loop
    finally:
        loop.run_until_complete(engine.close())
        loop.close()


def generation(engine: LlamaCppEngine, question: str, sampling: Sampling) -> GenerationRequest:
    prompt = engine.render_chat([Message("system", SYSTEM), Message("user", question)])
    ids = tuple(engine.tokenize(prompt, chat=True))
    return GenerationRequest(request_id=question, prompt=prompt, prompt_ids=ids, sampling=sampling)


async def answer(engine: LlamaCppEngine, request: GenerationRequest) -> str:
    parts = []
    async with contextlib.aclosing(engine.generate(request)) as chunks:
        async for chunk in chunks:
            parts.append(chunk.text)
    return "".join(parts)


def alone(engine: LlamaCppEngine, loop: asyncio.AbstractEventLoop, requests: list) -> list[str]:
    return [loop.run_until_complete(answer(engine, r)) for r in requests]


def together(engine: LlamaCppEngine, loop: asyncio.AbstractEventLoop, requests: list) -> list[str]:
    async def go() -> list[str]:
        return list(await asyncio.gather(*(answer(engine, r) for r in requests)))

    return loop.run_until_complete(go())


SAMPLINGS = [
    Sampling(temperature=0.0, max_tokens=20),
    Sampling(temperature=0.0, max_tokens=12),
    Sampling(temperature=0.9, top_p=0.9, top_k=40, max_tokens=16, seed=7),
    Sampling(temperature=0.0, max_tokens=16, repetition_penalty=1.3),
]


@pytest.fixture(scope="module")
def reference() -> list[str]:
    """Each request alone on an engine that shares nothing: no prefix cache, no neighbour."""
    engine = LlamaCppEngine(settings(prefix_cache=False))
    with running(engine) as loop:
        requests = [generation(engine, q, s) for q, s in zip(QUESTIONS, SAMPLINGS, strict=True)]
        answers = alone(engine, loop, requests)
        assert engine.model.reused_tokens == 0
    return answers


def test_batched_requests_sharing_a_prefix_answer_as_each_alone(reference: list[str]) -> None:
    engine = LlamaCppEngine(settings())
    model = engine.model
    with running(engine) as loop:
        requests = [generation(engine, q, s) for q, s in zip(QUESTIONS, SAMPLINGS, strict=True)]
        prompt_tokens = sum(len(r.prompt_ids) for r in requests)
        shared = min(common_prefix(requests[0].prompt_ids, r.prompt_ids) for r in requests)
        assert shared > 100, "the requests should share the system prompt"

        # Cold: the four arrive at once; three wait for the first to read the system prompt
        # and take it, all but the last long pass, which each reads as it would alone.
        assert together(engine, loop, requests) == reference
        shortest = min(len(r.prompt_ids) for r in requests)
        assert model.reused_tokens >= 3 * min(shared, shortest - FA_TILE_ROWS) > 0
        assert model.read_tokens == prompt_tokens - model.reused_tokens
        assert model.held_tokens == prompt_tokens, "each slot keeps the prompt it ran"

        # Warm: each prompt is kept whole by a slot; only its last long pass is read again
        # (FA_TILE_ROWS tokens, computed as a lone request computes them).
        reused, read = model.reused_tokens, model.read_tokens
        assert together(engine, loop, requests) == reference
        assert model.read_tokens - read == len(requests) * FA_TILE_ROWS
        assert model.reused_tokens - reused == prompt_tokens - len(requests) * FA_TILE_ROWS

        # One at a time, each from a kept prompt: the same again.
        assert alone(engine, loop, requests) == reference
        details = engine.info().details
        assert details["prefix_cache"] == "on"
        assert int(details["prefix_reused_tokens"]) == model.reused_tokens
        assert int(details["prefix_held_tokens"]) == model.held_tokens > 0


def test_requests_joining_mid_answer_copy_the_running_prefix(
    reference: list[str],
) -> None:
    engine = LlamaCppEngine(settings())
    with running(engine) as loop:
        requests = [generation(engine, q, s) for q, s in zip(QUESTIONS, SAMPLINGS, strict=True)]

        async def staggered() -> list[str]:
            first = asyncio.ensure_future(answer(engine, requests[0]))
            while engine.model.read_tokens == 0:
                await asyncio.sleep(0.01)  # the first is answering: the rest join mid-answer
            rest = await asyncio.gather(*(answer(engine, r) for r in requests[1:]))
            return [await first, *rest]

        assert loop.run_until_complete(staggered()) == reference
        assert engine.model.reused_tokens > 0


@pytest.mark.parametrize("chunk", [16, 100])
def test_prompts_longer_than_a_pass_are_read_whole_with_small_prefill_chunks(chunk: int) -> None:
    """PREFILL_CHUNK under FA_TILE_ROWS reads every prompt in short passes, as alone; one
    under twice FA_TILE_ROWS cannot always split a prompt into long passes, but still reads
    it whole. Either way every request finishes."""
    sampling = Sampling(temperature=0.0, max_tokens=4)
    lone = LlamaCppEngine(settings(prefill_chunk=chunk, prefix_cache=False))
    with running(lone) as loop:
        requests = [generation(lone, q, sampling) for q in QUESTIONS[:3]]
        expected = alone(lone, loop, requests)
    engine = LlamaCppEngine(settings(prefill_chunk=chunk))
    with running(engine) as loop:
        answers = together(engine, loop, requests)
    assert all(answers)
    if chunk < FA_TILE_ROWS:
        assert answers == expected
