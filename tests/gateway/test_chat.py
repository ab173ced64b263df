"""The OpenAI-compatible endpoints through the real `openai` client, against the gateway and
the real embedder, retriever and generator processes (llama.cpp on SmolLM2-135M)."""

from __future__ import annotations

import base64
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from services.gateway.chat.conversation import retrieval_query, turns_of
from services.gateway.chat.protocol import ChatMessageIn
from tests.conftest import free_port, gateway_process, grpc_service

pytestmark = pytest.mark.integration
COLLECTION = "chat"
BEES = "How do honeybees tell each other where the flowers are?"
SHORT = {"max_tokens": 24, "temperature": 0}
# The generator's text as it comes from whole chunks (no evidence selection, no grounding):
# what tests of streaming and of the prompt's context window look at.
RAW = {"answer_mode": "generative", "evidence_selection": False, "enable_grounding": False}


@pytest.fixture(scope="module")
def client(suite) -> openai.OpenAI:  # type: ignore[no-untyped-def]
    suite.ingest_sample(COLLECTION)
    return openai.OpenAI(base_url=f"{suite.gateway_url}/v1", api_key="unused", max_retries=0)


def test_grounded_answer_with_citations(client: openai.OpenAI) -> None:
    # generative: auto would answer with the reader where this checkout has trained one
    # (`make up` does), and then nothing is generated.
    reply = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": BEES}],
        extra_body={"collection": COLLECTION, "reranker_top_k": 3, "answer_mode": "generative"},
        **SHORT,
    )
    answer = reply.choices[0].message.content
    assert answer and answer.strip()
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-")
    assert reply.model == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert reply.usage.prompt_tokens > 50 and 0 < reply.usage.completion_tokens <= 24
    extra = reply.model_extra or {}
    citations = extra["citations"]
    assert 1 <= len(citations) <= 3
    assert citations[0]["document_name"] == "honeybee-colonies.md"
    assert [c["index"] for c in citations] == list(range(1, len(citations) + 1))
    assert citations[0]["collection"] == COLLECTION and citations[0]["snippet"]
    timings = extra["timings"]
    assert timings["retrieval_ms"] > 0 and timings["generation_ms"] > 0
    assert timings["total_ms"] >= timings["generation_ms"] + timings["retrieval_ms"]
    assert extra["guardrails"]["enabled"] is False
    assert any("no guardrails service" in w for w in extra["warnings"])


def test_streamed_answer_ends_with_citations(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": BEES}],
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"collection": COLLECTION, "reranker_top_k": 2, **RAW},
        **SHORT,
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(content) >= 3, "the answer should arrive in pieces"
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1
    final = finals[0].model_extra or {}
    assert final["citations"][0]["document_name"] == "honeybee-colonies.md"
    assert final["timings"]["ttft_ms"] > 0
    usage = chunks[-1]
    assert usage.choices == [] and usage.usage is not None
    assert usage.usage.completion_tokens == usage.usage.total_tokens - usage.usage.prompt_tokens
    assert len({c.id for c in chunks}) == 1


def test_without_a_knowledge_base_the_question_goes_straight_to_the_model(
    client: openai.OpenAI,
) -> None:
    reply = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Say hello."}], **SHORT
    )
    assert reply.choices[0].message.content
    extra = reply.model_extra or {}
    assert extra["citations"] == [] and extra["timings"]["retrieval_ms"] == 0
    assert reply.usage.prompt_tokens < 50  # no sources in the prompt


def test_follow_up_questions_retrieve_with_the_earlier_turns(client: openai.OpenAI) -> None:
    conversation = [
        {"role": "user", "content": "Tell me about the Rhine."},
        {"role": "assistant", "content": "It is a river in Europe."},
        {"role": "user", "content": "Where does it begin and end?"},
    ]
    cited = {}
    for rewrite in (True, False):
        reply = client.chat.completions.create(
            model="any",
            messages=conversation,
            extra_body={
                "collection": COLLECTION,
                "reranker_top_k": 1,
                "enable_query_rewriting": rewrite,
                "search_mode": "dense",
            },
            **SHORT,
        )
        cited[rewrite] = (reply.model_extra or {})["citations"][0]["document_name"]
    assert cited[True] == "rhine-history.md"
    assert cited[False] != "rhine-history.md"  # "it" alone does not name the river


def test_retrieval_query_joins_the_user_turns() -> None:
    turns = turns_of(
        [
            ChatMessageIn(role="system", content="be brief"),
            ChatMessageIn(role="user", content="first"),
            ChatMessageIn(role="assistant", content="answer"),
            ChatMessageIn(role="user", content=[{"type": "text", "text": "second"}]),
            ChatMessageIn(role="user", content="third"),
        ]
    )
    assert retrieval_query(turns, 0) == "third"
    assert retrieval_query(turns, 1) == "second\nthird"
    assert retrieval_query(turns, 5) == "first\nsecond\nthird"


def test_sources_that_do_not_fit_the_context_window_are_left_out(
    client: openai.OpenAI,
) -> None:
    # The generator's context_length is 4096: a 2048-token answer and a long system message
    # leave room for one or two sources of the eight asked for.
    reply = client.chat.completions.create(
        model="any",
        messages=[
            {"role": "system", "content": "Be brief. " * 450},
            {"role": "user", "content": BEES},
        ],
        max_tokens=2048,
        stop=["\n", "."],
        temperature=0,
        extra_body={"collection": COLLECTION, "reranker_top_k": 8, **RAW},
    )
    extra = reply.model_extra or {}
    assert 1 <= len(extra["citations"]) < 8, extra["warnings"]
    assert any("did not fit" in w for w in extra["warnings"])
    assert reply.usage.prompt_tokens <= 4096 - 2048


def test_the_oldest_turns_that_do_not_fit_are_left_out(client: openai.OpenAI) -> None:
    # Each earlier turn is about 700 tokens: with a 2048-token answer in a 4096-token window
    # the oldest ones must go, the question stays.
    long = "The river runs past the old mill and the stone bridge. " * 60
    conversation = [
        {"role": "user", "content": long},
        {"role": "assistant", "content": long},
        {"role": "user", "content": long},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Say hello."},
    ]
    reply = client.chat.completions.create(
        model="any", messages=conversation, max_tokens=2048, stop=["\n", "."], temperature=0
    )
    extra = reply.model_extra or {}
    assert any("oldest message(s) did not fit" in w for w in extra["warnings"]), extra
    assert 0 < reply.usage.prompt_tokens <= 4096 - 2048


def grpc_calls(suite, service: str, method: str) -> float:  # type: ignore[no-untyped-def]
    """Calls a service has handled, from its own /metrics (ragrail_grpc_requests_total)."""
    port = suite.env[f"RAGRAIL_{service.upper()}_METRICS_PORT"]
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    pattern = rf'ragrail_grpc_requests_total\{{[^}}]*method="{method}"[^}}]*\}} (\S+)'
    return sum(float(n) for n in re.findall(pattern, text))


def test_a_chat_counts_its_prompt_tokens_in_one_call(client: openai.OpenAI, suite) -> None:  # type: ignore[no-untyped-def]
    # generative: with a reader this checkout trained, auto would extract and count nothing.
    grounded = {"collection": COLLECTION, "reranker_top_k": 3, "answer_mode": "generative"}
    for knowledge_base in (grounded, {}):
        before = grpc_calls(suite, "generator", "CountTokens")
        client.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": BEES}],
            extra_body=knowledge_base,
            **SHORT,
        )
        assert grpc_calls(suite, "generator", "CountTokens") - before == 1


def test_the_generator_info_is_asked_once_per_connection(client: openai.OpenAI, suite) -> None:  # type: ignore[no-untyped-def]
    # A gateway of its own whose Info copy never ages within the test: on a loaded machine two
    # chats may be more than the default 10 s apart, and asking again is then right.
    with gateway_process(generator_info_max_age_s="3600") as url:
        own = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)

        def ask() -> str:
            reply = own.chat.completions.create(
                model="any", messages=[{"role": "user", "content": "Say hello."}], max_tokens=2
            )
            return reply.model

        ask()
        asked = grpc_calls(suite, "generator", "Info")
        ask()
        assert grpc_calls(suite, "generator", "Info") == asked  # cached
        suite.restart("generator")  # a new process, which may serve another model: ask it again
        models = [ask() for _ in range(3)]
        assert models == ["SmolLM2-135M-Instruct.Q4_1.gguf"] * 3
        assert grpc_calls(suite, "generator", "Info") == 1  # the new process was asked once


def test_the_generator_info_is_asked_again_once_it_is_older_than_its_max_age(
    client: openai.OpenAI,
    suite,  # type: ignore[no-untyped-def]
) -> None:
    with gateway_process(generator_info_max_age_s="0.5") as url:
        own = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        say = {"model": "any", "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 2}
        own.chat.completions.create(**say)
        asked = grpc_calls(suite, "generator", "Info")
        time.sleep(0.6)
        own.chat.completions.create(**say)
        assert grpc_calls(suite, "generator", "Info") == asked + 1


def test_embeddings_and_models(client: openai.OpenAI) -> None:
    floats = client.embeddings.create(
        model="any", input=["bees dance", "tcp handshake"], encoding_format="float"
    )
    default = client.embeddings.create(model="any", input=["bees dance", "tcp handshake"])
    assert len(floats.data) == 2 and [d.index for d in floats.data] == [0, 1]
    for a, b in zip(floats.data, default.data, strict=True):
        assert len(a.embedding) == 384
        assert np.allclose(a.embedding, b.embedding, atol=1e-6)  # base64 on the wire
        assert abs(np.linalg.norm(a.embedding) - 1) < 1e-3
    assert floats.usage.prompt_tokens > 0
    models = {m.id: m.model_extra["service"] for m in client.models.list()}
    assert models["SmolLM2-135M-Instruct.Q4_1.gguf"] == "generator"
    assert "embedder" in models.values()


def test_base64_embeddings_are_little_endian_float32(suite) -> None:  # type: ignore[no-untyped-def]
    body = {"input": "bees", "encoding_format": "base64"}
    data = suite.http.post("/v1/embeddings", json=body).json()["data"][0]["embedding"]
    floats = suite.http.post("/v1/embeddings", json={**body, "encoding_format": "float"})
    decoded = np.frombuffer(base64.b64decode(data), dtype="<f4")
    assert np.allclose(decoded, floats.json()["data"][0]["embedding"], atol=1e-6)


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"messages": []}, 422, "messages"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, 422, "last message"),
        ({"messages": [{"role": "user", "content": "hi"}], "n": 2}, 422, "n:"),
        ({"messages": [{"role": "user", "content": "  "}]}, 422, "empty"),
        (
            {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]},
            422,
            "tools",
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}], "temperature": 3},
            422,
            "temperature",
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}], "collection": "missing"},
            404,
            "missing",
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}], "enable_guardrails": True},
            409,
            "RAGRAIL_GATEWAY_GUARDRAILS_URL",
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100_000},
            422,
            "max_tokens",
        ),
        ({"input": []}, 422, "input"),
    ],
)
def test_bad_requests_get_a_clear_4xx(suite, body: dict, status: int, message: str) -> None:  # type: ignore[no-untyped-def]
    path = "/v1/embeddings" if "input" in body else "/v1/chat/completions"
    reply = suite.http.post(path, json=body)
    assert reply.status_code == status, reply.text
    assert message in reply.json()["error"]["message"]


def test_a_down_generator_is_a_503_naming_it(client) -> None:  # type: ignore[no-untyped-def]
    with gateway_process(
        generator_url=f"127.0.0.1:{free_port()}", generation_timeout_s="20"
    ) as url:
        down = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        for stream in (False, True):
            started = time.monotonic()
            with pytest.raises(openai.APIStatusError) as caught:
                reply = down.chat.completions.create(
                    model="any",
                    messages=[{"role": "user", "content": BEES}],
                    stream=stream,
                    extra_body={"collection": COLLECTION},
                    **SHORT,
                )
                list(reply) if stream else None  # type: ignore[call-overload]
            assert caught.value.status_code == 503
            assert "generator service" in caught.value.message
            assert time.monotonic() - started < 15


def test_stopping_the_reranker_mid_run_degrades_answers_without_failures(
    client, tiny_reranker: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    env = {"RAGRAIL_RERANKER_MODEL": str(tiny_reranker), "RAGRAIL_RERANKER_BACKEND": "onnx"}
    with (
        grpc_service("services.reranker", "RERANKER", env, tmp_path / "reranker.log") as reranker,
        gateway_process(reranker_url=reranker) as url,
    ):
        chat = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)

        def ask(_: int) -> list[str]:
            reply = chat.chat.completions.create(
                model="any",
                messages=[{"role": "user", "content": BEES}],
                max_tokens=4,
                temperature=0,
                extra_body={"collection": COLLECTION, "reranker_top_k": 2},
            )
            assert reply.choices[0].message.content is not None
            return (reply.model_extra or {})["warnings"]

        with ThreadPoolExecutor(2) as pool:
            before = list(pool.map(ask, range(4)))
            running = [pool.submit(ask, i) for i in range(6)]
            time.sleep(0.5)
            reranker.process.terminate()  # mid-run: some requests are in flight
            reranker.process.wait(timeout=30)
            during = [f.result() for f in running]  # none raised
            after = list(pool.map(ask, range(2)))
    assert not any("not reranked" in w for ws in before for w in ws)
    assert all(any("not reranked" in w for w in ws) for ws in after)
    assert len(during) == 6
