"""The embedder as a real process: gRPC calls, health, reflection, errors, metrics."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
from grpc_health.v1 import health_pb2

from shared.proto.ragrail.v1 import common_pb2, embedder_pb2, embedder_pb2_grpc
from tests.grpc_calls import health_and_services, unary

pytestmark = pytest.mark.integration


def _call(target: str, method: str, request: Any) -> Any:
    # Generous: on a loaded 2-core machine one long text can wait behind other work.
    return unary(embedder_pb2_grpc.EmbedderStub, target, method, request, timeout=120)


def test_embeds_normalised_vectors_in_input_order(suite) -> None:  # type: ignore[no-untyped-def]
    texts = ["Honeybees dance to share where flowers are.", "TCP opens with a handshake."]
    reply = _call(suite.target("embedder"), "Embed", embedder_pb2.EmbedRequest(texts=texts))
    vectors = np.array([e.values for e in reply.embeddings])
    assert vectors.shape == (2, reply.dimension) == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    single = _call(suite.target("embedder"), "Embed", embedder_pb2.EmbedRequest(texts=texts[1:]))
    assert np.allclose(vectors[1], single.embeddings[0].values, atol=1e-4)
    assert reply.total_tokens > 10


def test_queries_land_near_their_passage(suite) -> None:  # type: ignore[no-untyped-def]
    passages = [
        "Bees communicate food locations with a waggle dance.",
        "The Rhine flows from the Alps to the North Sea.",
    ]
    p = _call(suite.target("embedder"), "Embed", embedder_pb2.EmbedRequest(texts=passages))
    q = _call(
        suite.target("embedder"),
        "Embed",
        embedder_pb2.EmbedRequest(
            texts=["how do bees tell each other where food is"],
            input_type=embedder_pb2.INPUT_TYPE_QUERY,
        ),
    )
    sims = np.array([e.values for e in p.embeddings]) @ np.array(q.embeddings[0].values)
    assert sims[0] > sims[1] + 0.2


def test_tokenize_returns_offsets_into_the_text(suite) -> None:  # type: ignore[no-untyped-def]
    text = "Photosynthesis turns light into chemical energy."
    reply = _call(suite.target("embedder"), "Tokenize", embedder_pb2.TokenizeRequest(texts=[text]))
    tokens = reply.texts[0]
    assert tokens.num_tokens == len(tokens.starts) == len(tokens.ends) > 5
    pieces = [text[s:e] for s, e in zip(tokens.starts, tokens.ends, strict=True)]
    assert pieces[0].lower() == "photos" and pieces[-1] == "."
    assert "".join(pieces) == text.replace(" ", "")


def test_info_reports_the_model(suite) -> None:  # type: ignore[no-untyped-def]
    info = _call(suite.target("embedder"), "Info", common_pb2.InfoRequest())
    assert info.service.service == "embedder"
    assert info.service.backend == "sentence-transformers"
    assert (info.dimension, info.max_length, info.normalized) == (384, 256, True)


@pytest.mark.parametrize(
    ("texts", "fragment"),
    [([], "texts is empty"), (["ok", "   "], "texts[1] is empty"), (["x" * 300_000], "characters")],
)
def test_bad_input_is_invalid_argument(suite, texts, fragment) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        _call(suite.target("embedder"), "Embed", embedder_pb2.EmbedRequest(texts=texts))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert fragment in info.value.details()


def test_health_reflection_and_metrics(suite) -> None:  # type: ignore[no-untyped-def]
    status, names = health_and_services(suite.target("embedder"), "ragrail.v1.Embedder")
    assert status == health_pb2.HealthCheckResponse.SERVING
    assert "ragrail.v1.Embedder" in names and "grpc.health.v1.Health" in names
    metrics = httpx.get(
        f"http://127.0.0.1:{suite.env['RAGRAIL_EMBEDDER_METRICS_PORT']}/metrics"
    ).text
    assert 'ragrail_grpc_requests_total{code="OK",method="Embed",service="embedder"}' in metrics
    assert 'code="INVALID_ARGUMENT"' in metrics


def test_deadline_is_enforced(suite) -> None:  # type: ignore[no-untyped-def]
    async def go() -> None:
        async with grpc.aio.insecure_channel(suite.target("embedder")) as channel:
            await embedder_pb2_grpc.EmbedderStub(channel).Embed(
                embedder_pb2.EmbedRequest(texts=["word " * 200] * 512), timeout=0.05
            )

    with pytest.raises(grpc.aio.AioRpcError) as info:
        asyncio.run(go())
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_a_request_whose_caller_is_gone_stops_using_the_model(suite) -> None:  # type: ignore[no-untyped-def]
    # 2,048 long texts are a minute of one model's work on 2 cores: served as one call, the
    # model stayed busy with them long after the deadline, and the next caller timed out.
    async def go() -> None:
        async with grpc.aio.insecure_channel(suite.target("embedder")) as channel:
            stub = embedder_pb2_grpc.EmbedderStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Embed(
                    embedder_pb2.EmbedRequest(texts=["word " * 200] * 2048), timeout=0.5
                )
            assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            # Its deadline is the check: behind the old servicer's minute of work it expired.
            reply = await stub.Embed(embedder_pb2.EmbedRequest(texts=["a short one"]), timeout=20)
            assert len(reply.embeddings) == 1

    asyncio.run(go())


def test_long_texts_are_truncated_to_the_model_window(suite) -> None:  # type: ignore[no-untyped-def]
    words = " ".join(f"word{i}" for i in range(400))  # well over 512 tokens
    head = _call(suite.target("embedder"), "Tokenize", embedder_pb2.TokenizeRequest(texts=[words]))
    assert head.texts[0].num_tokens > 512  # Tokenize itself does not truncate
    long = _call(suite.target("embedder"), "Embed", embedder_pb2.EmbedRequest(texts=[words]))
    cut = words[: head.texts[0].ends[253]]  # the 254 tokens the model keeps (+2 special)
    short = _call(suite.target("embedder"), "Embed", embedder_pb2.EmbedRequest(texts=[cut]))
    assert np.allclose(long.embeddings[0].values, short.embeddings[0].values, atol=1e-4)
    assert long.total_tokens == 256
