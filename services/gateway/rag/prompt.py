"""Prompt assembly within the generator's context window: the system prompt with numbered
sources (most relevant first, as many as fit), then the conversation, oldest turns dropped
first when even that does not fit."""

from __future__ import annotations

from dataclasses import dataclass

from services.gateway.rag.conversation import Turn
from shared.errors import InvalidArgument
from shared.proto.ragrail.v1 import common_pb2, generator_pb2

# Tokens kept free besides the answer: chat-template tokens the count may miss at the seams.
SAFETY_MARGIN = 16


@dataclass(frozen=True)
class Source:
    """A retrieved chunk offered to the model as [index]."""

    chunk_id: str
    document_id: str
    document_name: str
    chunk_index: int
    collection: str
    score: float
    text: str


@dataclass
class Prompt:
    messages: list[common_pb2.ChatMessage]
    sources: list[Source]  # those that fit, numbered from 1 in this order
    prompt_tokens: int
    dropped_sources: int
    dropped_turns: int


def source_block(index: int, source: Source) -> str:
    return f"[{index}] {source.document_name}\n{source.text.strip()}"


def system_text(instructions: str | None, user_system: list[str], blocks: list[str]) -> str:
    """The user's own system messages, then (for a grounded answer) the instructions and the
    numbered sources. instructions None: no knowledge base, the conversation goes as sent."""
    if instructions is None:
        return "\n\n".join(user_system)
    sources = "\n\n".join(blocks) if blocks else "(no source matched the question)"
    return "\n\n".join([*user_system, instructions, "Sources:", sources])


def to_messages(system: str, turns: list[Turn]) -> list[common_pb2.ChatMessage]:
    messages = [common_pb2.ChatMessage(role="system", content=system)] if system else []
    return messages + [common_pb2.ChatMessage(role=t.role, content=t.text) for t in turns]


class PromptBuilder:
    """Counts with the generator's own tokenizer and chat template (CountTokens), so what it
    builds fits the model it goes to."""

    def __init__(self, count_tokens, context_length: int) -> None:  # type: ignore[no-untyped-def]
        self._count = count_tokens  # async (CountTokensRequest) -> CountTokensResponse
        self.context_length = context_length

    async def build(
        self,
        turns: list[Turn],
        sources: list[Source],
        instructions: str | None,
        max_tokens: int,
    ) -> Prompt:
        user_system = [t.text for t in turns if t.role == "system" and t.text.strip()]
        dialogue = [t for t in turns if t.role != "system"]
        budget = self.context_length - max_tokens - SAFETY_MARGIN
        if budget <= 0:
            raise InvalidArgument(
                f"max_tokens {max_tokens} leaves no room for the prompt in the model's "
                f"{self.context_length}-token context window; ask for fewer tokens"
            )

        # The conversation without sources must fit; drop the oldest turns until it does.
        dropped_turns = 0
        while True:
            base = to_messages(system_text(instructions, user_system, []), dialogue)
            base_tokens = await self._prompt_tokens(base)
            if base_tokens <= budget or len(dialogue) == 1:
                break
            dialogue = dialogue[1:]
            dropped_turns += 1
        if base_tokens > budget:
            raise InvalidArgument(
                f"the question is {base_tokens} tokens; with max_tokens {max_tokens} the model's "
                f"{self.context_length}-token context window has room for {budget}; shorten it"
            )

        blocks = [source_block(i + 1, s) for i, s in enumerate(sources)]
        kept = len(sources)
        if sources:
            counted = await self._count(generator_pb2.CountTokensRequest(texts=blocks))
            room = budget - base_tokens - SAFETY_MARGIN  # instructions and "Sources:" header
            kept, used = 0, 0
            for tokens in counted.text_tokens:
                if used + tokens + 2 > room:  # +2: the blank line between sources
                    break
                used += tokens + 2
                kept += 1
        while True:
            messages = to_messages(system_text(instructions, user_system, blocks[:kept]), dialogue)
            total = await self._prompt_tokens(messages)
            if total <= budget or kept == 0:
                break
            kept -= 1  # the estimate was short: the template's seams cost a few tokens more
        return Prompt(messages, sources[:kept], total, len(sources) - kept, dropped_turns)

    async def _prompt_tokens(self, messages: list[common_pb2.ChatMessage]) -> int:
        reply = await self._count(generator_pb2.CountTokensRequest(messages=messages))
        return reply.prompt_tokens
