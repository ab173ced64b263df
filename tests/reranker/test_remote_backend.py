"""The reranker's `rerank` backend against a real /rerank server: infinity
(tests/infinity_peer, `make infinity-env`) serving the reranker the suite trains, next to a
reranker service on the same model in local PyTorch; both real processes over gRPC.

Checked: the same chunk order (and scores) from both, top_n and thresholds alike, passages
split to RAGRAIL_RERANKER_REMOTE_BATCH_SIZE, a wrong backend or key stopping the start with a
message naming the fix, `ragrail up` starting a remote reranker without a model directory, and
a server that went away (UNAVAILABLE naming the URL). NIM's /v1/ranking mapping is checked
against NVIDIA's published example in test_remote_mapping.py (no NIM runs here).
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

from services.reranker.backends import load_backend
from services.reranker.settings import RerankerSettings
from shared.errors import FailedPrecondition, Unavailable
from shared.proto.ragrail.v1 import common_pb2, reranker_pb2, reranker_pb2_grpc
from tests import infinity_peer
from tests.conftest import Target, grpc_service
from tests.grpc_calls import unary

pytestmark = pytest.mark.integration

MODEL = "tiny-reranker"
KEY = "rerank-key-31b0"
QUERY = "how do honeybees tell each other where flowers are"
# Short enough that no pair reaches the tiny model's 64 tokens: infinity truncates at the
# tokenizer's own limit, the local backend at the model's max_length.
PASSAGES = [
    "TCP opens a connection with a three-way handshake.",
    "Forager honeybees dance to show where flowers are.",
    "Sourdough rises because wild yeast ferments flour.",
    "Bumblebees shiver to warm their flight muscles.",
    "The Rhine flows from the Alps to the North Sea.",
    "Honeybee colonies collapse when workers vanish.",
    "Bees find flowers by scent and colour.",
]


@pytest.fixture(scope="module")
def launched(
    tiny_reranker: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[infinity_peer.InfinityServer]:
    """infinity starting (the local reranker starts meanwhile)."""
    log = tmp_path_factory.mktemp("infinity") / "infinity.log"
    yield from infinity_peer.launch_for_tests({MODEL: tiny_reranker}, log, api_key=KEY)


@pytest.fixture(scope="module")
def infinity(launched: infinity_peer.InfinityServer) -> infinity_peer.InfinityServer:
    infinity_peer.wait_ready(launched)
    return launched


@pytest.fixture(scope="module")
def rerankers(
    launched: infinity_peer.InfinityServer,
    tiny_reranker: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Target]]:
    logs = tmp_path_factory.mktemp("rerankers")
    remote_env = {
        "RAGRAIL_RERANKER_BACKEND": "rerank",
        "RAGRAIL_RERANKER_REMOTE_URL": launched.url,
        "RAGRAIL_RERANKER_REMOTE_MODEL": MODEL,
        "RAGRAIL_RERANKER_REMOTE_API_KEY": KEY,
        "RAGRAIL_RERANKER_REMOTE_BATCH_SIZE": "3",
        "RAGRAIL_RERANKER_REMOTE_RETRIES": "1",
        "RAGRAIL_RERANKER_REMOTE_RETRY_BACKOFF_S": "0.05",
        # No model directory anywhere: a remote reranker needs none.
        "RAGRAIL_RERANKER_MODELS_DIR": str(logs / "no-models"),
    }
    local_env = {"RAGRAIL_RERANKER_MODEL": str(tiny_reranker)}
    with grpc_service("services.reranker", "RERANKER", local_env, logs / "local.log") as local:
        infinity_peer.wait_ready(launched)
        with grpc_service(
            "services.reranker", "RERANKER", remote_env, logs / "remote.log"
        ) as remote:
            yield {"local": local, "remote": remote}


call = functools.partial(unary, reranker_pb2_grpc.RerankerStub)


def rerank(target: str, query: str, texts: list[str], **options: Any) -> Any:
    passages = [common_pb2.TextPassage(text=t) for t in texts]
    request = reranker_pb2.RerankRequest(query=query, passages=passages, **options)
    return call(target, "Rerank", request)


def rerank_requests(server: infinity_peer.InfinityServer) -> float:
    text = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5).text
    pattern = r'http_requests_total\{handler="/v1/rerank",method="POST",status="2xx"\} (\S+)'
    return sum(float(m) for m in re.findall(pattern, text))


def test_same_chunk_order_as_the_local_reranker(rerankers: dict[str, Target]) -> None:
    queries = [QUERY, "what makes bread rise", "where does the Rhine flow", "network protocols"]
    for query in queries:
        local = rerank(rerankers["local"], query, PASSAGES)
        remote = rerank(rerankers["remote"], query, PASSAGES)
        assert [r.index for r in remote.results] == [r.index for r in local.results], query
        assert np.allclose(
            [r.score for r in remote.results], [r.score for r in local.results], atol=1e-4
        )
        assert [r.passage.text for r in remote.results] == [r.passage.text for r in local.results]
    # top_n and a threshold cut the same passages.
    local = rerank(rerankers["local"], QUERY, PASSAGES, top_n=3)
    remote = rerank(rerankers["remote"], QUERY, PASSAGES, top_n=3)
    assert [r.index for r in remote.results] == [r.index for r in local.results]
    threshold = float(
        np.median([r.score for r in rerank(rerankers["local"], QUERY, PASSAGES).results])
    )
    local = rerank(rerankers["local"], QUERY, PASSAGES, score_threshold=threshold)
    remote = rerank(rerankers["remote"], QUERY, PASSAGES, score_threshold=threshold)
    assert [r.index for r in remote.results] == [r.index for r in local.results]


def test_passages_split_to_the_servers_limit(
    rerankers: dict[str, Target], infinity: infinity_peer.InfinityServer
) -> None:
    before = rerank_requests(infinity)
    rerank(rerankers["remote"], QUERY, PASSAGES)
    assert rerank_requests(infinity) - before == 3  # ceil(7 / REMOTE_BATCH_SIZE=3)


def test_info_names_the_backend_model_and_server(
    rerankers: dict[str, Target], infinity: infinity_peer.InfinityServer
) -> None:
    info = call(rerankers["remote"], "Info", common_pb2.InfoRequest())
    assert (info.service.backend, info.service.model) == ("rerank", MODEL)
    assert info.service.details["remote_url"] == infinity.url
    assert info.service.details["device"] == "remote"
    assert KEY not in str(info)
    reply = rerank(rerankers["remote"], QUERY, PASSAGES[:2])
    assert reply.model == MODEL


def settings(server: infinity_peer.InfinityServer, **changes: Any) -> RerankerSettings:
    base = dict(
        backend="rerank", remote_url=server.url, remote_model=MODEL, remote_api_key=KEY,
        remote_retries=0,
    )  # fmt: skip
    return RerankerSettings(**{**base, **changes})


def test_a_wrong_backend_or_key_stops_the_start(infinity: infinity_peer.InfinityServer) -> None:
    # infinity has no NIM /v1/ranking: the start probe says where to look.
    with pytest.raises(FailedPrecondition) as info:
        load_backend(settings(infinity, backend="nim"))
    assert (
        "/v1/ranking" in info.value.message and "RAGRAIL_RERANKER_REMOTE_URL" in info.value.message
    )
    with pytest.raises(Unavailable) as refused:
        load_backend(settings(infinity, remote_api_key="not-the-key-77"))
    assert "refused the API key" in refused.value.message
    assert "not-the-key-77" not in refused.value.message


def test_ragrail_up_starts_a_remote_reranker_without_a_model_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ragrail.launcher import reranker_not_startable

    monkeypatch.setenv("RAGRAIL_RERANKER_MODELS_DIR", str(tmp_path / "none"))
    monkeypatch.delenv("RAGRAIL_RERANKER_MODEL", raising=False)
    monkeypatch.setenv("RAGRAIL_RERANKER_BACKEND", "sentence-transformers")
    assert "no model" in reranker_not_startable()
    for backend in ("rerank", "nim"):
        monkeypatch.setenv("RAGRAIL_RERANKER_BACKEND", backend)
        assert reranker_not_startable() == ""


def test_server_gone_is_unavailable_naming_it(
    rerankers: dict[str, Target], infinity: infinity_peer.InfinityServer
) -> None:
    # Last in this module: it stops the module's server.
    infinity_peer.stop(infinity)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        rerank(rerankers["remote"], QUERY, PASSAGES)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert infinity.url in info.value.details()
    assert len(rerank(rerankers["local"], QUERY, PASSAGES).results) == len(PASSAGES)
