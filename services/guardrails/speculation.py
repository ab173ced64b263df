"""Speculative rail actions: a check's flows marked `speculative` (rails/base.py, Flow) start
together as the check begins, each on the check's own text, instead of one after another as
the flows reach them.

Why: an output check is two model runs (the guard model's unsafe head on the answer, the
sentence encoder for groundedness) and Presidio, in turn, with the Colang runtime's steps
between them. onnxruntime releases the GIL, so started together the runs overlap each other
and the Python work around them on the cores.

Verdicts are unchanged. The flows still run in their configured order, and each still calls
its action; the action is answered from the started run only when it is called with the very
arguments that run started with (a rail before it that changed the text, masked it or dropped
a chunk makes them differ, and the action runs anew on what it was given). A speculative
action is a pure function of its arguments (no cache an earlier flow fills), so the run it
started gives what the call would. What a check did not use when it ends (an earlier rail
blocked) is cancelled; the time a flow reports is how long the check waited on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from services.guardrails.rails.base import Action, Flow


class Started:
    """The runs one check started: (action name, its arguments, the task running it)."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, dict[str, Any], asyncio.Future[Any]]] = []

    def take(self, action: str, params: dict[str, Any]) -> asyncio.Future[Any] | None:
        for i, (name, args, task) in enumerate(self.runs):
            if name == action and args == params:
                del self.runs[i]
                return task
        return None

    def cancel(self) -> None:
        for _, _, task in self.runs:
            task.cancel()
        self.runs.clear()


_started: contextvars.ContextVar[Started | None] = contextvars.ContextVar(
    "ragrail_speculation", default=None
)


def _retrieve(task: asyncio.Future[Any]) -> None:
    # An unused run that raised would be logged as "never retrieved"; the flow that would
    # have used it was not reached, so nothing is lost.
    if not task.cancelled():
        task.exception()


@contextlib.contextmanager
def speculating(
    flows: Iterable[Flow], actions: Mapping[str, Action], values: Mapping[str, Any]
) -> Iterator[Started]:
    """Within this block (one check, in this task), the speculative ones of `flows` are
    running, their Colang variables bound to `values`; `served` actions take their results.
    `actions` are the rails' own (unwrapped) actions."""
    started = Started()
    for flow in flows:
        if flow.speculative and flow.action in actions:
            try:
                params = flow.bind(values)
            except KeyError:
                continue  # a variable this check does not set: the flow runs in its turn
            task = asyncio.ensure_future(actions[flow.action](**params))
            task.add_done_callback(_retrieve)
            started.runs.append((flow.action, params, task))
    token = _started.set(started)
    try:
        yield started
    finally:
        _started.reset(token)
        started.cancel()


def served(name: str, action: Action) -> Action:
    """`action` (registered as `name`), answered from the run `speculating` started with the
    same arguments when there is one. It keeps the action's signature, which NeMo Guardrails
    reads to choose what to pass."""

    @functools.wraps(action)
    async def run(**params: Any) -> Any:
        started = _started.get()
        task = started.take(name, params) if started is not None else None
        if task is None:
            return await action(**params)
        return await task

    return run
