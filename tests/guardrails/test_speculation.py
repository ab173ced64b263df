"""services/guardrails/speculation.py: a speculative flow's action is answered from the run
started with the check, only when called with the same arguments; what a check did not use
is cancelled; other flows start nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from services.guardrails.rails.base import Flow
from services.guardrails.speculation import served, speculating

SPECULATIVE = Flow("check on output", "output", "check", speculative=True)
SLOW = Flow("slow on output", "output", "slow", speculative=True)
PLAIN = Flow("plain on output", "output", "plain")
VALUES = {"$bot_message": "the answer", "$user_message": "the question"}


def actions(calls: list[tuple[str, str]]) -> dict[str, Any]:
    async def check(text: str) -> dict[str, Any]:
        calls.append(("check", text))
        return {"verdict": "allow", "text": text}

    async def slow(text: str) -> dict[str, Any]:
        calls.append(("slow", text))
        await asyncio.sleep(60)
        return {"verdict": "allow"}

    async def plain(text: str) -> dict[str, Any]:
        calls.append(("plain", text))
        return {"verdict": "allow"}

    return {"check": check, "slow": slow, "plain": plain}


def test_the_started_run_answers_a_call_with_the_same_arguments() -> None:
    calls: list[tuple[str, str]] = []
    raw = actions(calls)
    check = served("check", raw["check"])

    async def go() -> dict[str, Any]:
        with speculating([PLAIN, SPECULATIVE], raw, VALUES):
            await asyncio.sleep(0)
            return await check(text="the answer")

    assert asyncio.run(go()) == {"verdict": "allow", "text": "the answer"}
    # Started once with the check, not again when the flow called it; `plain` not started.
    assert calls == [("check", "the answer")]


def test_a_call_with_other_arguments_runs_the_action_on_them() -> None:
    calls: list[tuple[str, str]] = []
    raw = actions(calls)
    check = served("check", raw["check"])

    async def go() -> dict[str, Any]:
        with speculating([SPECULATIVE], raw, VALUES):
            # An earlier rail masked the answer: the started run is for the original text.
            return await check(text="the <MASKED> answer")

    assert asyncio.run(go())["text"] == "the <MASKED> answer"
    assert ("check", "the <MASKED> answer") in calls


def test_unused_runs_are_cancelled_when_the_check_ends() -> None:
    raw = actions([])

    async def go() -> list[asyncio.Future[Any]]:
        with speculating([SLOW], raw, VALUES) as started:
            tasks = [task for _, _, task in started.runs]
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        return tasks

    (task,) = asyncio.run(go())
    assert task.cancelled()


def test_served_keeps_the_signature_nemo_guardrails_reads() -> None:
    import inspect

    raw = actions([])
    assert list(inspect.signature(served("check", raw["check"])).parameters) == ["text"]


def test_a_flow_reading_a_variable_the_check_lacks_runs_in_its_turn() -> None:
    calls: list[tuple[str, str]] = []
    raw = actions(calls)
    odd = Flow("odd on output", "output", "check", {"text": "$elsewhere"}, speculative=True)

    async def go() -> list[Any]:
        with speculating([odd], raw, VALUES) as started:
            return list(started.runs)

    assert asyncio.run(go()) == [] and calls == []
