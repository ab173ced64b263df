"""The guardrails stages of a chat: input, retrieval and output checks through the guardrails
service, turned into the outcomes a response reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.gateway.openai_schemas import RailOutcome
from services.gateway.rag.conversation import Turn
from services.gateway.rag.prompt import Source
from shared.clients import ServiceClient
from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2

VERDICTS = {
    guardrails_pb2.VERDICT_ALLOW: "allow",
    guardrails_pb2.VERDICT_BLOCK: "block",
    guardrails_pb2.VERDICT_MODIFY: "modify",
}


def outcome(result: guardrails_pb2.RailResult) -> RailOutcome:
    verdict = VERDICTS.get(result.verdict, "block")  # an unknown verdict is not an allow
    return RailOutcome(
        verdict=verdict,  # type: ignore[arg-type]
        rail=result.rail,
        reason=result.reason,
        modified=verdict == "modify",
        duration_ms=round(result.duration_ms, 2),
    )


@dataclass
class RetrievalOutcome:
    sources: list[Source]
    changed: list[dict[str, str]] = field(default_factory=list)  # dropped or redacted chunks
    duration_ms: float = 0.0


class Rails:
    """One client, three checks; every call carries the remaining deadline of the request."""

    def __init__(self, client: ServiceClient) -> None:
        self.client = client

    async def check_input(self, turns: list[Turn], timeout_s: float) -> tuple[RailOutcome, str]:
        """The input verdict and the text to use for the last user message."""
        request = guardrails_pb2.CheckInputRequest(
            messages=[common_pb2.ChatMessage(role=t.role, content=t.text) for t in turns]
        )
        result = await self.client.call("CheckInput", request, timeout_s=timeout_s)
        text = result.modified_text if result.verdict == guardrails_pb2.VERDICT_MODIFY else ""
        return outcome(result), text

    async def check_retrieval(
        self, query: str, sources: list[Source], timeout_s: float
    ) -> RetrievalOutcome:
        """Drops the chunks a rail blocks and uses the redacted text of those it modifies."""
        if not sources:
            return RetrievalOutcome([])
        request = guardrails_pb2.CheckRetrievalRequest(
            query=query,
            chunks=[common_pb2.TextPassage(id=s.chunk_id, text=s.text) for s in sources],
        )
        reply = await self.client.call("CheckRetrieval", request, timeout_s=timeout_s)
        verdicts = {c.id: c.result for c in reply.chunks}
        kept: list[Source] = []
        changed: list[dict[str, str]] = []
        for source in sources:
            result = verdicts.get(source.chunk_id)
            if result is None or result.verdict == guardrails_pb2.VERDICT_ALLOW:
                kept.append(source)
                continue
            decided = outcome(result)
            changed.append(
                {
                    "chunk_id": source.chunk_id,
                    "verdict": decided.verdict,
                    "rail": decided.rail,
                    "reason": decided.reason,
                }
            )
            if decided.verdict == "modify":
                kept.append(
                    Source(**{**source.__dict__, "text": result.modified_text})  # redacted
                )
        return RetrievalOutcome(kept, changed, round(reply.duration_ms, 2))

    async def check_output(
        self, turns: list[Turn], answer: str, sources: list[Source], timeout_s: float
    ) -> tuple[RailOutcome, str]:
        """The output verdict and the answer to send (modified when a rail rewrote it)."""
        request = guardrails_pb2.CheckOutputRequest(
            messages=[common_pb2.ChatMessage(role=t.role, content=t.text) for t in turns],
            answer=answer,
            context=[common_pb2.TextPassage(id=s.chunk_id, text=s.text) for s in sources],
        )
        result = await self.client.call("CheckOutput", request, timeout_s=timeout_s)
        decided = outcome(result)
        return decided, result.modified_text if decided.modified else answer
