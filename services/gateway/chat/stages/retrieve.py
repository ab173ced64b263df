"""The retrieval stage: the query (the question, with earlier user turns when rewriting is
on), searched as the chat's RetrievalPlan says in each of its collections, merged."""

from __future__ import annotations

from services.gateway.chat.conversation import retrieval_query
from services.gateway.chat.stages import Stage
from services.gateway.chat.state import ChatState
from services.gateway.search.serving import merge, retrieve


class Retrieve(Stage):
    name = "retrieval"

    def applies(self, chat: ChatState) -> bool:
        return bool(chat.options.plan.collections)

    async def run(self, chat: ChatState) -> None:
        plan = chat.options.plan
        chat.query = retrieval_query(chat.turns, chat.options.history_turns)
        timeout = chat.deadline.left(self.settings.request_timeout_s)
        results = await retrieve(self.services, plan, chat.query, timeout_s=timeout)
        chat.timings.retrieval_ms = max(r.embed_ms + r.retrieval_ms for r in results)
        chat.timings.rerank_ms = max(r.rerank_ms for r in results)
        for result in results:
            chat.warnings += [f"{result.collection}: {w}" for w in result.warnings]
        chat.passages = merge(results, plan.keep_k)
