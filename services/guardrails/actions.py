"""The ragrail rails as NeMo Guardrails actions (the names rails.co executes).

Each action runs one rail and returns Outcome.as_dict(). A rail that raises never escapes:
it becomes an "errored" outcome whose verdict is the rail's `on_error` (block by default,
fail closed), logged with its traceback.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from services.guardrails.rails import Outcome
from services.guardrails.railset import RailSet

log = logging.getLogger(__name__)
Action = Callable[..., Awaitable[dict[str, Any]]]


def failed(rail: str, on_error: str, exc: BaseException) -> Outcome:
    log.error("rail failed", exc_info=exc, extra={"rail": rail, "on_error": on_error})
    side = "failing closed" if on_error == "block" else "failing open"
    return Outcome(
        "block" if on_error == "block" else "allow",
        f"rail error ({type(exc).__name__}), {side} as configured (on_error: {on_error})",
        errored=True,
    )


async def guarded(
    rail: str, on_error: str, fn: Callable[[], Outcome], inline: bool = False
) -> Outcome:
    """fn() on a worker thread (models must not stall the event loop), or in the loop when
    `inline` (rails that take microseconds: a thread hand-off costs more than they do);
    errors contained."""
    started = time.perf_counter()
    try:
        outcome = fn() if inline else await asyncio.to_thread(fn)
    except Exception as exc:
        outcome = failed(rail, on_error, exc)
    outcome.details["rail_ms"] = round((time.perf_counter() - started) * 1000, 3)
    return outcome


def chunk_rail(
    rail: str, on_error: str, check: Callable[[list[str]], list[Outcome]]
) -> Callable[[list[str | None]], Any]:
    """Runs `check` on the chunks still present (None marks a dropped one); a blocked chunk
    is dropped, a modified one replaced. Returns the new list and one outcome per chunk."""

    def run(chunks: list[str | None]) -> dict[str, Any]:
        live = [i for i, c in enumerate(chunks) if c is not None]
        try:
            results = check([str(chunks[i]) for i in live])
        except Exception as exc:
            results = [failed(rail, on_error, exc)] * len(live)
        outcomes: list[dict[str, Any] | None] = [None] * len(chunks)
        new = list(chunks)
        for i, outcome in zip(live, results, strict=True):
            outcomes[i] = outcome.as_dict()
            if outcome.verdict == "block":
                new[i] = None
            elif outcome.verdict == "modify":
                new[i] = outcome.text
        changed = sum(1 for o in outcomes if o and o["verdict"] != "allow")
        return {
            "verdict": "modify" if changed else "allow",
            "reason": f"{changed} of {len(live)} chunk(s) dropped or changed" if changed else "",
            "chunks": new,
            "outcomes": outcomes,
        }

    return run


def make_actions(rs: RailSet, prefetch_topics: bool = False) -> dict[str, Action]:
    """The actions on `rs`. With `prefetch_topics` (the topic rail runs after the injection
    rail), the injection rail's worker thread also embeds the message for the topic rail,
    which then finds the vector cached and answers without a thread of its own."""
    cfg = rs.config
    prefetch = prefetch_topics and rs.general_vectors is not rs.classifier_vectors

    async def ragrail_limits(text: str) -> dict[str, Any]:
        return (
            await guarded("limits", cfg.limits.on_error, lambda: rs.limits.check(text), inline=True)
        ).as_dict()

    async def ragrail_deny_list(text: str) -> dict[str, Any]:
        # Inline: the limits rail runs first and caps the text's length.
        outcome = await guarded(
            "deny list", cfg.deny_list.on_error, lambda: rs.deny_list.check(text), inline=True
        )
        return outcome.as_dict()

    async def ragrail_injection(text: str) -> dict[str, Any]:
        def run() -> Outcome:
            outcome = rs.injection.check_vector(rs.classifier_vectors([text])[0])
            if prefetch and outcome.verdict != "block":
                rs.general_vectors([text])
            return outcome

        return (await guarded("injection", cfg.injection.on_error, run)).as_dict()

    async def ragrail_topics(text: str) -> dict[str, Any]:
        vector = rs.general_vectors.cached(text)

        def run() -> Outcome:
            return rs.topics.check_vector(
                rs.general_vectors([text])[0] if vector is None else vector
            )

        inline = vector is not None  # only the similarity left to compute
        return (await guarded("topics", cfg.topics.on_error, run, inline=inline)).as_dict()

    async def ragrail_pii(text: str, source: str = "input") -> dict[str, Any]:
        rail = rs.pii_output if source == "output" else rs.pii_input
        return (
            await guarded(f"pii {source}", cfg.pii.on_error, lambda: rail.check(text))
        ).as_dict()

    async def ragrail_grounding(text: str, passages: list[str] | None = None) -> dict[str, Any]:
        context = [str(p) for p in passages or []]
        outcome = await guarded(
            "grounding", cfg.grounding.on_error, lambda: rs.grounding.check(text, context)
        )
        return outcome.as_dict()

    chunk_injection = chunk_rail(
        "chunk injection",
        cfg.injection.on_error,
        lambda chunks: rs.injection.check_chunks(chunks, cfg.injection.window_chars),
    )
    chunk_pii = chunk_rail(
        "chunk pii", cfg.pii.on_error, lambda chunks: [rs.pii_retrieval.check(c) for c in chunks]
    )

    async def ragrail_chunk_injection(chunks: list[str | None] | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(chunk_injection, list(chunks or []))

    async def ragrail_chunk_pii(chunks: list[str | None] | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(chunk_pii, list(chunks or []))

    return {
        "ragrail_limits": ragrail_limits,
        "ragrail_deny_list": ragrail_deny_list,
        "ragrail_injection": ragrail_injection,
        "ragrail_topics": ragrail_topics,
        "ragrail_pii": ragrail_pii,
        "ragrail_grounding": ragrail_grounding,
        "ragrail_chunk_injection": ragrail_chunk_injection,
        "ragrail_chunk_pii": ragrail_chunk_pii,
    }
