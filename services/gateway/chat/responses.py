"""A finished chat as OpenAI's response: the ChatCompletion, or the chunks of a stream as
server-sent events (the last one with a finish_reason carries ragrail's extras)."""

from __future__ import annotations

import json

from services.gateway.chat.protocol import (
    AssistantMessage,
    ChatCompletion,
    Choice,
    Citation,
    Usage,
)
from services.gateway.chat.state import ChatState


def completion(chat: ChatState) -> ChatCompletion:
    answer = chat.answer
    assert answer is not None
    citations = []
    if chat.options.citations and chat.prompt is not None:
        citations = [
            Citation.of(i, source, answer.text, chat.highlights.get(i, []))
            for i, source in enumerate(chat.prompt.sources, start=1)
        ]
    return ChatCompletion(
        id=chat.id,
        created=chat.created,
        model=chat.model,
        choices=[
            Choice(
                message=AssistantMessage(content=answer.text), finish_reason=answer.finish_reason
            )
        ],
        usage=Usage(
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            total_tokens=answer.prompt_tokens + answer.completion_tokens,
        ),
        citations=citations,
        answer=chat.answer_report,
        guardrails=chat.report,
        timings=chat.timings,
        warnings=chat.warnings,
    )


def sse(payload: dict) -> str:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"


DONE = "data: [DONE]\n\n"


def chunk(chat: ChatState, choices: list[dict], **extra: object) -> str:
    return sse(
        {
            "id": chat.id,
            "object": "chat.completion.chunk",
            "created": chat.created,
            "model": chat.model,
            "choices": choices,
            **extra,
        }
    )


def delta(chat: ChatState, delta: dict) -> str:
    return chunk(chat, [{"index": 0, "delta": delta, "finish_reason": None}])


def final(chat: ChatState, done: ChatCompletion) -> str:
    """The last chunk: finish_reason and ragrail's citations, rails, timings, warnings."""
    choice = {"index": 0, "delta": {}, "finish_reason": done.choices[0].finish_reason}
    return chunk(
        chat,
        [choice],
        citations=[c.model_dump() for c in done.citations],
        answer=done.answer.model_dump() if done.answer else None,
        guardrails=done.guardrails.model_dump(),
        timings=done.timings.model_dump(),
        warnings=done.warnings,
    )


def usage(chat: ChatState, done: ChatCompletion) -> str:
    """stream_options.include_usage: a last chunk with no choices and the usage."""
    return chunk(chat, [], usage=done.usage.model_dump())
