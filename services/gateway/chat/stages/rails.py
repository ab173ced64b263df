"""The guardrails stages: the question (input), the retrieved chunks (retrieval) and the
answer (output), each checked by the guardrails service within the chat's deadline."""

from __future__ import annotations

from services.gateway.chat import metrics
from services.gateway.chat.conversation import Turn
from services.gateway.chat.protocol import ChunkOutcome, RailOutcome
from services.gateway.chat.stages import Stage
from services.gateway.chat.state import Answer, ChatState
from services.gateway.search.passage import Passage
from shared.clients import GuardrailsClient, RailVerdict
from shared.verdict import Verdict


def outcome(verdict: RailVerdict) -> RailOutcome:
    return RailOutcome(
        verdict=verdict.verdict,
        rail=verdict.rail,
        reason=verdict.reason,
        modified=verdict.verdict == Verdict.MODIFY,
        duration_ms=round(verdict.duration_ms, 2),
    )


class _RailStage(Stage):
    timing = "guardrails_ms"

    def applies(self, chat: ChatState) -> bool:
        return chat.options.rails

    @property
    def client(self) -> GuardrailsClient:
        assert self.services.guardrails is not None  # ChatOptions turns rails off without one
        return self.services.guardrails

    def timeout(self, chat: ChatState) -> float:
        return chat.deadline.left(self.settings.guardrails_timeout_s)


class InputRails(_RailStage):
    """Blocks the question, or masks it (the last user turn is replaced)."""

    name = "input_rails"

    async def run(self, chat: ChatState) -> None:
        verdict = await self.client.check_input(chat.turns, timeout_s=self.timeout(chat))
        chat.report.input = outcome(verdict)
        metrics.RAIL_VERDICTS.labels("input", verdict.verdict).inc()
        if verdict.verdict == Verdict.BLOCK:
            chat.blocked = True
        elif verdict.verdict == Verdict.MODIFY:
            chat.turns[-1] = Turn(chat.turns[-1].role, verdict.modified_text)


class RetrievalRails(_RailStage):
    """Drops the chunks a rail blocks and uses the redacted text of those it modifies."""

    name = "retrieval_rails"

    def applies(self, chat: ChatState) -> bool:
        return chat.options.rails and bool(chat.passages)

    async def run(self, chat: ChatState) -> None:
        verdicts = await self.client.check_retrieval(
            chat.query,
            [(p.chunk_id, p.text) for p in chat.passages],
            timeout_s=self.timeout(chat),
        )
        kept: list[Passage] = []
        for passage in chat.passages:
            verdict = verdicts.get(passage.chunk_id)
            if verdict is None or verdict.verdict == Verdict.ALLOW:
                kept.append(passage)
                continue
            chat.report.retrieval.append(
                ChunkOutcome(
                    chunk_id=passage.chunk_id,
                    verdict=verdict.verdict,
                    rail=verdict.rail,
                    reason=verdict.reason,
                )
            )
            metrics.RAIL_VERDICTS.labels("retrieval", verdict.verdict).inc()
            if verdict.verdict == Verdict.MODIFY:
                kept.append(passage.with_text(verdict.modified_text))  # redacted
        if chat.passages and not kept:
            chat.blocked = True
            chat.withheld = withheld_text(chat.report.retrieval)
        chat.passages = kept


def withheld_text(dropped: list[ChunkOutcome]) -> str:
    """What the answer says when the retrieval rails dropped every chunk found: not a bare
    refusal, but that sources exist and were withheld, by which rail and why."""
    n = len(dropped)
    reasons = list(dict.fromkeys(f"{d.rail}: {d.reason}" for d in dropped))[:2]
    return (
        f"{'The source' if n == 1 else f'All {n} sources'} found for this question "
        f"{'was' if n == 1 else 'were'} withheld by the guardrails, so there is nothing to "
        f"answer from ({'; '.join(reasons)})."
    )


class OutputRails(_RailStage):
    """Checks the answer against the question and its sources; a blocked answer becomes the
    refusal, a modified one its rewritten text."""

    name = "output_rails"

    def applies(self, chat: ChatState) -> bool:
        # An abstention is the gateway's own configured sentence (chat_abstention) and the
        # names of the closest sources, not generated text: grounding would refuse it as
        # unsupported ("hi" asked of a collection ended in a refusal).
        report = chat.answer_report
        return chat.options.rails and not (report is not None and report.abstained)

    async def run(self, chat: ChatState) -> None:
        assert chat.answer is not None and chat.prompt is not None
        verdict = await self.client.check_output(
            chat.turns,
            chat.answer.text,
            [(p.chunk_id, p.text) for p in chat.prompt.sources],
            grounded=chat.grounded,
            timeout_s=self.timeout(chat),
        )
        chat.report.output = outcome(verdict)
        metrics.RAIL_VERDICTS.labels("output", verdict.verdict).inc()
        if verdict.verdict == Verdict.BLOCK:
            chat.answer = Answer(
                self.settings.chat_refusal,
                "content_filter",
                chat.answer.prompt_tokens,
                chat.answer.completion_tokens,
            )
        elif verdict.verdict == Verdict.MODIFY:
            chat.answer.text = verdict.modified_text
