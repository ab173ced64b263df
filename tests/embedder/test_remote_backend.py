"""The embedder's `openai` backend against a real model server: infinity (tests/infinity_peer,
`make infinity-env`) serving the packaged MiniLM on a loopback port, next to an embedder on
the same model in process-local PyTorch; both as real services over gRPC.

Checked: the same vectors (cosine >= 0.9999) for passages and queries with prefixes, batches
split to RAGRAIL_EMBEDDER_REMOTE_BATCH_SIZE (counted on the server's own metrics), Tokenize
from the tokenizer directory (and the approximation without one), a refused key and a server
that went away (UNAVAILABLE naming the URL). NIM's `input_type` and `truncate` are checked
on the request bodies (test_nim_mapping.py has NVIDIA's published examples).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pytest

from services.embedder.backends import load_backend
from services.embedder.settings import EmbedderSettings
from shared.errors import Unavailable
from shared.models.encoder import PACKAGED_MODEL_NAME, offsets_of, packaged_minilm
from shared.models.remote_encoder import RemoteEncoder, approximate_offsets, load_tokenizer
from shared.proto.ragrail.v1 import common_pb2, embedder_pb2, embedder_pb2_grpc
from tests import infinity_peer
from tests.conftest import Target, grpc_service
from tests.grpc_calls import unary

pytestmark = pytest.mark.integration

KEY = "test-key-8f1c"
PREFIXES = {"RAGRAIL_EMBEDDER_QUERY_PREFIX": "query: ", "RAGRAIL_EMBEDDER_PASSAGE_PREFIX": "doc: "}
PASSAGES = [
    "Forager honeybees dance on the comb to show the direction and distance of flowers.",
    "TCP opens a connection with a three-way handshake of SYN, SYN-ACK and ACK.",
    "Sourdough rises because wild yeast ferments the sugars in flour.",
    "Bees " + "and flowers " * 300,  # longer than MiniLM's 256 tokens: both sides truncate
    "Ünïcödé text, émojis 🐝 and CJK 蜜蜂 survive the JSON round trip.",
    "The Rhine flows from the Swiss Alps to the North Sea.",
    "Honeybee colonies collapse when workers vanish and leave the queen behind.",
]
QUERIES = ["how do bees tell each other where flowers are", "what makes bread rise"]


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[infinity_peer.InfinityServer]:
    """infinity starting (the local embedder starts meanwhile)."""
    log = tmp_path_factory.mktemp("infinity") / "infinity.log"
    models = {PACKAGED_MODEL_NAME: packaged_minilm()}
    yield from infinity_peer.launch_for_tests(models, log, api_key=KEY)


@pytest.fixture(scope="module")
def infinity(launched: infinity_peer.InfinityServer) -> infinity_peer.InfinityServer:
    infinity_peer.wait_ready(launched)
    return launched


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("secrets") / "embedder-key"
    path.write_text(KEY + "\n")
    return path


def remote_env(
    server: infinity_peer.InfinityServer, key_file: Path, **extra: str
) -> dict[str, str]:
    return {
        "RAGRAIL_EMBEDDER_BACKEND": "openai",
        "RAGRAIL_EMBEDDER_REMOTE_URL": server.url,
        "RAGRAIL_EMBEDDER_REMOTE_API_KEY_FILE": str(key_file),
        "RAGRAIL_EMBEDDER_REMOTE_TOKENIZER": str(packaged_minilm()),
        "RAGRAIL_EMBEDDER_REMOTE_BATCH_SIZE": "3",
        "RAGRAIL_EMBEDDER_REMOTE_RETRIES": "1",
        "RAGRAIL_EMBEDDER_REMOTE_RETRY_BACKOFF_S": "0.05",
        **PREFIXES,
        **extra,
    }


@pytest.fixture(scope="module")
def embedders(
    launched: infinity_peer.InfinityServer, key_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Target]]:
    """The local and the remote embedder, as processes, on the same model."""
    logs = tmp_path_factory.mktemp("embedders")
    env = remote_env(launched, key_file)
    with grpc_service("services.embedder", "EMBEDDER", dict(PREFIXES), logs / "local.log") as local:
        infinity_peer.wait_ready(launched)
        with grpc_service("services.embedder", "EMBEDDER", env, logs / "remote.log") as remote:
            yield {"local": local, "remote": remote}


call = functools.partial(unary, embedder_pb2_grpc.EmbedderStub)


def embed(target: str, texts: list[str], input_type: int = 0) -> np.ndarray:
    request = embedder_pb2.EmbedRequest(texts=texts, input_type=input_type)
    return np.array([e.values for e in call(target, "Embed", request).embeddings])


def embedding_requests(server: infinity_peer.InfinityServer) -> float:
    """POSTs to /v1/embeddings the server has answered, from its own Prometheus metrics."""
    text = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5).text
    pattern = r'http_requests_total\{handler="/v1/embeddings",method="POST",status="2xx"\} (\S+)'
    return sum(float(m) for m in re.findall(pattern, text))


# -- through the services ------------------------------------------------------------------


def test_remote_vectors_equal_local_ones(embedders: dict[str, Target]) -> None:
    for input_type in (embedder_pb2.INPUT_TYPE_PASSAGE, embedder_pb2.INPUT_TYPE_QUERY):
        texts = PASSAGES if input_type == embedder_pb2.INPUT_TYPE_PASSAGE else QUERIES
        local = embed(embedders["local"], texts, input_type)
        remote = embed(embedders["remote"], texts, input_type)
        assert local.shape == remote.shape == (len(texts), 384)
        cosines = (local * remote).sum(axis=1)
        assert cosines.min() >= 0.9999, cosines
        assert np.allclose(np.linalg.norm(remote, axis=1), 1.0, atol=1e-5)
    # The prefixes reach the remote model: a query and the same text as a passage differ.
    as_query = embed(embedders["remote"], QUERIES[:1], embedder_pb2.INPUT_TYPE_QUERY)
    as_passage = embed(embedders["remote"], QUERIES[:1], embedder_pb2.INPUT_TYPE_PASSAGE)
    assert float(as_query[0] @ as_passage[0]) < 0.999
    # And a query finds its passage.
    assert int(np.argmax(embed(embedders["remote"], PASSAGES) @ as_query[0])) == 0


def test_info_and_reply_name_the_same_model_as_local(embedders: dict[str, Target]) -> None:
    local = call(embedders["local"], "Info", common_pb2.InfoRequest())
    remote = call(embedders["remote"], "Info", common_pb2.InfoRequest())
    assert remote.service.backend == "openai"
    assert remote.service.model == local.service.model == PACKAGED_MODEL_NAME
    assert (remote.dimension, remote.max_length, remote.normalized) == (384, 256, True)
    assert remote.service.details["remote_url"].startswith("http://127.0.0.1:")
    assert remote.service.details["tokenizer"] == "exact"
    assert KEY not in str(remote)
    reply = call(embedders["remote"], "Embed", embedder_pb2.EmbedRequest(texts=PASSAGES[:2]))
    assert (reply.model, reply.dimension) == (PACKAGED_MODEL_NAME, 384)
    local_reply = call(embedders["local"], "Embed", embedder_pb2.EmbedRequest(texts=PASSAGES[:2]))
    assert reply.total_tokens == local_reply.total_tokens


def test_batches_split_to_the_servers_limit(
    embedders: dict[str, Target], infinity: infinity_peer.InfinityServer
) -> None:
    texts = [f"Bee fact number {i}: bees visit about {i * 7} flowers a trip." for i in range(11)]
    before = embedding_requests(infinity)
    remote = embed(embedders["remote"], texts)
    assert embedding_requests(infinity) - before == 4  # ceil(11 / REMOTE_BATCH_SIZE=3)
    assert (remote * embed(embedders["local"], texts)).sum(axis=1).min() >= 0.9999  # in order


def test_tokenize_uses_the_models_tokenizer(embedders: dict[str, Target]) -> None:
    request = embedder_pb2.TokenizeRequest(texts=PASSAGES)
    local = call(embedders["local"], "Tokenize", request)
    remote = call(embedders["remote"], "Tokenize", request)
    assert remote == local


# -- the backend in process ----------------------------------------------------------------


def remote_settings(server: infinity_peer.InfinityServer, **changes: Any) -> EmbedderSettings:
    base = dict(backend="openai", remote_url=server.url, remote_api_key=KEY, remote_retries=0)
    return EmbedderSettings(**{**base, **changes})


def test_a_refused_key_stops_the_start_with_a_clear_message(
    infinity: infinity_peer.InfinityServer,
) -> None:
    with pytest.raises(Unavailable) as info:
        load_backend(remote_settings(infinity, remote_api_key="wrong-key-5d2"))
    message = info.value.message
    assert "refused the API key" in message and "RAGRAIL_EMBEDDER_REMOTE_API_KEY" in message
    assert infinity.url in message and "wrong-key-5d2" not in message


def test_request_bodies_carry_input_type_and_truncate_when_asked(
    infinity: infinity_peer.InfinityServer,
) -> None:
    """infinity ignores NIM's fields, so the bodies are read as they leave (NIM's own examples
    are in test_nim_mapping.py)."""
    encoder = load_backend(remote_settings(infinity, remote_input_type=True, remote_truncate="END"))
    assert isinstance(encoder, RemoteEncoder)
    sent: list[bytes] = []
    encoder.client.event_hooks["request"].append(lambda request: sent.append(request.read()))
    try:
        encoder.embed_for(["a query"], "query")
        encoder.embed_for(["a passage"], "passage")
    finally:
        encoder.close()
    assert b'"input_type":"query"' in sent[0] and b'"truncate":"END"' in sent[0]
    assert b'"input_type":"passage"' in sent[1]
    # Off by default: servers other than NIM may reject the field.
    plain = load_backend(remote_settings(infinity))
    assert isinstance(plain, RemoteEncoder)
    plain.client.event_hooks["request"].append(lambda request: sent.append(request.read()))
    plain.embed_for(["a query"], "query")
    plain.close()
    assert b"input_type" not in sent[-1] and b"truncate" not in sent[-1]


def test_without_a_tokenizer_tokens_are_approximated_conservatively(
    infinity: infinity_peer.InfinityServer,
) -> None:
    encoder = load_backend(remote_settings(infinity))
    assert isinstance(encoder, RemoteEncoder)
    try:
        assert encoder.details()["tokenizer"] == "approximate"
        assert encoder.max_length == 512  # neither the settings nor a tokenizer say
        tokenizer, _ = load_tokenizer(packaged_minilm())  # the same model's own
        for text in PASSAGES:
            pieces = approximate_offsets([text])[0]
            assert len(pieces.starts) >= len(offsets_of(tokenizer, [text])[0].starts)
            assert all(text[s:e].strip() for s, e in zip(pieces.starts, pieces.ends, strict=True))
    finally:
        encoder.close()


def test_a_server_that_is_not_there_stops_the_start() -> None:
    from tests.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(Unavailable) as info:
        load_backend(EmbedderSettings(backend="openai", remote_url=url, remote_retries=0))
    assert url in info.value.message and "cannot be reached" in info.value.message


# -- last: it stops the module's server ----------------------------------------------------


def test_server_gone_is_unavailable_naming_it(
    embedders: dict[str, Target], infinity: infinity_peer.InfinityServer
) -> None:
    infinity_peer.stop(infinity)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        embed(embedders["remote"], ["anyone there?"])
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert infinity.url in info.value.details()
    assert "RAGRAIL_EMBEDDER_REMOTE_URL" in info.value.details()
    assert embed(embedders["local"], ["anyone there?"]).shape == (1, 384)
