"""The prompt stage: the system prompt with numbered sources (most relevant first, as many as
fit), then the conversation, oldest turns dropped first when even that does not fit. The
window is the generator's context length (its Info) less the answer's max_tokens, and the
tokens are counted once, with the generator's own tokenizer and chat template."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from services.gateway.chat.conversation import Turn
from services.gateway.chat.stages import Stage
from services.gateway.chat.state import ChatState, Prompt
from services.gateway.search.passage import Passage
from shared.clients import TokenCounts
from shared.errors import InvalidArgument

# Tokens kept free besides the answer: chat-template tokens the count may miss at the seams.
SAFETY_MARGIN = 16
# A text left out of the counted prompt may save a token fewer than it counts alone (it can
# merge with its neighbour in context), so each one is credited that much less.
SEAM_TOKENS = 1
NO_SOURCES = "(no source matched the question)"

CountTokens = Callable[[Sequence[Turn], Sequence[str]], Awaitable[TokenCounts]]


def source_block(index: int, source: Passage) -> str:
    return f"[{index}] {source.document_name}\n{source.text.strip()}"


def system_text(instructions: str | None, user_system: list[str], blocks: list[str]) -> str:
    """The user's own system messages, then (for a grounded answer) the instructions and the
    numbered sources. instructions None: no knowledge base, the conversation goes as sent."""
    if instructions is None:
        return "\n\n".join(user_system)
    sources = "\n\n".join(blocks) if blocks else NO_SOURCES
    return "\n\n".join([*user_system, instructions, "Sources:", sources])


def to_messages(system: str, turns: list[Turn]) -> list[Turn]:
    return ([Turn("system", system)] if system else []) + turns


def _too_long(max_tokens: int, context_length: int) -> InvalidArgument:
    return InvalidArgument(
        f"max_tokens {max_tokens} leaves no room for the prompt in the model's "
        f"{context_length}-token context window; ask for fewer tokens"
    )


async def build_prompt(
    count: CountTokens,
    context_length: int,
    turns: list[Turn],
    sources: list[Passage],
    instructions: str | None,
    max_tokens: int,
) -> Prompt:
    """One CountTokens call measures the whole prompt and each source and turn alone; what
    leaving some out would save is worked out from those counts, never under-estimating the
    prompt by more than SEAM_TOKENS a piece (and SAFETY_MARGIN covers that)."""
    if context_length - max_tokens - SAFETY_MARGIN <= 0:
        raise _too_long(max_tokens, context_length)
    user_system = [t.text for t in turns if t.role == "system" and t.text.strip()]
    dialogue = [t for t in turns if t.role != "system"]
    blocks = [source_block(i + 1, s) for i, s in enumerate(sources)]
    placeholder = [NO_SOURCES] if instructions is not None and blocks else []
    counted = await count(
        to_messages(system_text(instructions, user_system, blocks), dialogue),
        [*blocks, *(t.text for t in dialogue), *placeholder],
    )
    # The count's context length is the model's now (a reload may have changed it).
    context_length = counted.context_length or context_length
    budget = context_length - max_tokens - SAFETY_MARGIN
    if budget <= 0:
        raise _too_long(max_tokens, context_length)
    n = len(blocks)
    saves = [max(t - SEAM_TOKENS, 0) for t in counted.text_tokens]
    block_saves, turn_saves = saves[:n], saves[n : n + len(dialogue)]
    no_sources_cost = counted.text_tokens[-1] if placeholder else 0

    def tokens(kept: int, dropped: int) -> int:
        """The prompt with the first `kept` sources and without the `dropped` oldest turns."""
        total = counted.prompt_tokens - sum(block_saves[kept:]) - sum(turn_saves[:dropped])
        return total + (no_sources_cost if kept == 0 else 0)

    # The conversation without sources must fit; drop the oldest turns until it does.
    dropped = 0
    while tokens(0, dropped) > budget and dropped < len(dialogue) - 1:
        dropped += 1
    if tokens(0, dropped) > budget:
        raise InvalidArgument(
            f"the question is {tokens(0, dropped)} tokens; with max_tokens {max_tokens} the "
            f"model's {context_length}-token context window has room for {budget}; shorten it"
        )
    kept = n
    while kept and tokens(kept, dropped) > budget:
        kept -= 1
    messages = to_messages(
        system_text(instructions, user_system, blocks[:kept]), dialogue[dropped:]
    )
    return Prompt(messages, sources[:kept], tokens(kept, dropped), n - kept, dropped)


class BuildPrompt(Stage):
    name = "prompt"
    timing = "prompt_ms"

    async def run(self, chat: ChatState) -> None:
        grounded = bool(chat.options.plan.collections)
        instructions = self.settings.chat_system_prompt if grounded else None
        chat.prompt = await self.fit(chat, chat.passages, instructions, "retrieved chunk(s)")

    async def fit(
        self, chat: ChatState, sources: list[Passage], instructions: str | None, named: str
    ) -> Prompt:
        """build_prompt for this chat, its tokens counted by the generator within the request's
        deadline; what it left out becomes a warning (`named`: what the sources are)."""

        async def count(messages: Sequence[Turn], texts: Sequence[str]) -> TokenCounts:
            timeout = chat.deadline.left(self.settings.request_timeout_s)
            return await self.services.generator.count_tokens(messages, texts, timeout_s=timeout)

        prompt = await build_prompt(
            count,
            chat.generator.context_length,
            chat.turns,
            sources,
            instructions,
            chat.options.max_tokens,
        )
        if prompt.dropped_sources:
            chat.warnings.append(
                f"{prompt.dropped_sources} {named} did not fit in the model's context window "
                "and were left out"
            )
        if prompt.dropped_turns:
            chat.warnings.append(
                f"the {prompt.dropped_turns} oldest message(s) did not fit in the model's "
                "context window and were left out"
            )
        return prompt
