"""A conversation as the pipeline sees it: (role, text) turns, and the query it retrieves with."""

from __future__ import annotations

from typing import NamedTuple

from services.gateway.chat.protocol import ChatMessageIn


class Turn(NamedTuple):
    """One message: a (role, content) pair, as the typed service clients take messages."""

    role: str  # system, user or assistant
    text: str


def turns_of(messages: list[ChatMessageIn]) -> list[Turn]:
    """OpenAI messages as turns; `developer` is the newer name of `system`."""
    return [Turn("system" if m.role == "developer" else m.role, m.text) for m in messages]


def retrieval_query(turns: list[Turn], history_turns: int) -> str:
    """What to search for: the question, preceded by up to `history_turns` earlier user turns,
    so that a follow-up such as "and what are its side effects?" still carries the subject it
    refers to. Assistant turns are left out: they hold the model's words, not the user's need."""
    users = [t.text.strip() for t in turns if t.role == "user" and t.text.strip()]
    question = users[-1]
    earlier = users[-1 - history_turns : -1] if history_turns else []
    return "\n".join([*earlier, question])
