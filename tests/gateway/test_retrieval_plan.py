"""RetrievalPlan: one plan per request, for /v1/search and chat, each default from one
setting. Pure: request models and settings in, a plan out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.gateway.chat.protocol import ChatCompletionRequest
from services.gateway.search.plan import RetrievalPlan
from services.gateway.search.protocol import FusionMethod, RerankFusion, SearchMode, SearchRequest
from services.gateway.settings import GatewaySettings
from shared.errors import FailedPrecondition

GATEWAY = Path(__file__).resolve().parents[2] / "services" / "gateway"
SETTINGS = GatewaySettings()  # the defaults: 10, 50, 20, 4
QUESTION = [{"role": "user", "content": "how do bees talk?"}]


def search(reranker: bool = False, **body: object) -> RetrievalPlan:
    request = SearchRequest(query="bees", collection="docs", **body)  # type: ignore[arg-type]
    return RetrievalPlan.for_search(request, SETTINGS, reranker=reranker)


def chat(reranker: bool = False, **body: object) -> RetrievalPlan:
    request = ChatCompletionRequest(messages=QUESTION, **body)  # type: ignore[arg-type]
    return RetrievalPlan.for_chat(request, SETTINGS, reranker=reranker)


def test_a_search_without_reranking_fetches_what_it_returns() -> None:
    plan = search()
    assert (plan.rerank, plan.fetch_k, plan.keep_k) == (False, 10, 10)
    assert plan.collections == ("docs",) and plan.mode == SearchMode.hybrid
    assert plan.fusion == FusionMethod.rrf and (plan.rrf_k, plan.dense_weight) == (0, 0.0)
    assert search(top_k=3).fetch_k == 3
    # reranker_top_k is about reranked results: without reranking top_k rules
    assert search(top_k=3, reranker_top_k=7).keep_k == 3
    # an explicit first-stage depth is honoured, never below what is returned
    assert (search(top_k=3, vdb_top_k=30).fetch_k, search(top_k=8, vdb_top_k=2).fetch_k) == (30, 8)


def test_a_reranked_search_takes_search_vdb_top_k_candidates() -> None:
    plan = search(reranker=True)
    assert (plan.rerank, plan.fetch_k, plan.keep_k) == (True, 50, 10)
    assert plan.rerank_fusion == RerankFusion(SETTINGS.rerank_fusion)
    assert plan.rerank_rrf_k == SETTINGS.rerank_rrf_k
    assert search(reranker=True, reranker_top_k=80).fetch_k == 80
    assert search(reranker=True, vdb_top_k=12, reranker_top_k=3).fetch_k == 12
    assert search(reranker=True, rerank_fusion="rrf").rerank_fusion == RerankFusion.rrf
    assert search(reranker=True, rerank=False).rerank is False


def test_rerank_without_a_reranker_is_refused_naming_the_setting() -> None:
    with pytest.raises(FailedPrecondition, match=r"RAGRAIL_GATEWAY_RERANKER_URL.*rerank: false"):
        search(rerank=True)
    with pytest.raises(FailedPrecondition, match="enable_reranker: false"):
        chat(collection="docs", enable_reranker=True)
    # a chat that retrieves nothing needs no reranker
    assert chat(enable_reranker=True).rerank is False


def test_a_chat_without_a_reranker_fetches_only_what_the_prompt_gets() -> None:
    plan = chat(collection="docs")
    assert (plan.rerank, plan.fetch_k, plan.keep_k) == (False, 4, 4)
    assert chat(collection="docs", reranker_top_k=6).fetch_k == 6
    assert chat(collection="docs", vdb_top_k=30).fetch_k == 30  # asked for, so fetched


def test_a_reranked_chat_takes_chat_vdb_top_k_candidates() -> None:
    plan = chat(reranker=True, collection="docs", search_mode="dense", filter={"year": 2020})
    assert (plan.rerank, plan.fetch_k, plan.keep_k) == (True, 20, 4)
    assert plan.mode == SearchMode.dense and plan.filter == {"year": 2020}
    assert chat(reranker=True, collection="docs", reranker_top_k=30).fetch_k == 30
    assert chat(reranker=True, collection="docs", enable_reranker=False).fetch_k == 4


def test_a_chat_searches_every_collection_it_names_unless_told_not_to() -> None:
    assert chat().collections == ()
    assert chat(collection="a", collection_names=["b"]).collections == ("a", "b")
    assert chat(collection="a", use_knowledge_base=False).collections == ()


@pytest.mark.parametrize(
    "setting", ["default_top_k", "search_vdb_top_k", "chat_vdb_top_k", "chat_reranker_top_k"]
)
def test_each_retrieval_default_is_read_in_one_place(setting: str) -> None:
    readers = sorted(
        str(path.relative_to(GATEWAY))
        for path in GATEWAY.rglob("*.py")
        if re.search(rf"\.{setting}\b", path.read_text())
    )
    assert readers == ["search/plan.py"], readers
