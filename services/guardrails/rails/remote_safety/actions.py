"""Remote safety: an LLM safety model (NemoGuard content safety, Llama Guard 3) behind an
OpenAI-compatible server judges the user's message and the answer, beside the local guard
model's content-safety head; `combine` says how the two verdicts make one.

Both run at once (the local head on a worker thread while the request is out), so the rail
costs about the slower of the two. A block names the remote model's categories ("S1
Violence, S11 Threat") and, where it took part, the local head's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Histogram

from services.guardrails.rails.base import LoadedRail, Outcome, Resources, failed
from services.guardrails.rails.content_safety.actions import ContentSafetyRail, build
from services.guardrails.rails.remote_safety.settings import RemoteSafetySettings
from shared.errors import FailedPrecondition, RagrailError
from shared.models.remote import RemoteServer
from shared.models.remote_safety import Judgement, RemoteSafetyModel
from shared.models.safety_formats import MAX_TOKENS, UnreadableAnswer, categories_for
from shared.verdict import Verdict

log = logging.getLogger(__name__)
SECTION = "custom_data.ragrail.remote_safety"
RAIL = "remote safety"
LOCAL_FLOWS = {"input": "ragrail content safety", "output": "ragrail content safety on output"}
OWN_FLOWS = {"input": "ragrail remote safety", "output": "ragrail remote safety on output"}

JUDGEMENTS = Counter(
    "ragrail_guardrails_remote_safety_judgements_total",
    "Judgements asked of the remote safety model, by stage and result: safe, unsafe, error.",
    ["stage", "result"],
)
LATENCY = Histogram(
    "ragrail_guardrails_remote_safety_seconds",
    "Time the remote safety model took to judge (answered calls only).",
    ["stage"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


@dataclass(frozen=True)
class Remote:
    """The remote model's part of one check: a judgement, or why there is none."""

    judgement: Judgement | None
    error: str = ""


def combine(
    what: str, combine_as: str, on_error: str, remote: Remote, local: Outcome | None
) -> Outcome:
    """One verdict from the remote judgement and the local head's outcome (None: no local
    guard model, or combine_as remote). `what` is "request" or "answer"."""
    local_unsafe = local is not None and local.verdict == Verdict.BLOCK
    local_note = f"the local guard model: {local.reason}" if local_unsafe and local else ""
    details: dict[str, Any] = {"combine": combine_as}
    if local is not None:
        details["local"] = {"verdict": local.verdict.value, **local.details}
    if remote.judgement is None:
        details["remote"] = {"error": remote.error}
        why = f"the remote safety model gave no verdict ({remote.error})"
        if on_error == "allow":
            return Outcome(
                Verdict.ALLOW, f"{why}; failing open (on_error: allow)", None, details, True
            )
        if on_error == "local" and local is not None:
            if local_unsafe:
                reason = f"unsafe {what} per {local_note}; {why}, so the local verdict decided"
                return Outcome(Verdict.BLOCK, reason, None, details, True)
            reason = f"{why}; the local guard model found it safe (on_error: local)"
            return Outcome(Verdict.ALLOW, reason, None, details, True)
        side = "no local guard model to decide instead, " if on_error == "local" else ""
        return Outcome(
            Verdict.BLOCK,
            f"{why}; {side}failing closed (on_error: {on_error})",
            None,
            details,
            True,
        )
    judged = remote.judgement
    verdict = judged.verdict
    details["remote"] = {
        "safe": verdict.safe,
        "categories": list(verdict.categories),
        "model": judged.model,
        "answer": judged.answer.strip()[:200],
        "ms": round(judged.ms, 3),
    }
    remote_note = (
        f"the remote safety model ({judged.model}): {verdict.describe() or 'no category given'}"
    )
    if combine_as == "remote" or local is None:
        if verdict.safe:
            return Outcome(details=details)
        return Outcome(Verdict.BLOCK, f"unsafe {what} per {remote_note}", details=details)
    if combine_as == "both":
        if not verdict.safe and local_unsafe:
            reason = f"unsafe {what} per {remote_note}; and per {local_note}"
            return Outcome(Verdict.BLOCK, reason, details=details)
        if not verdict.safe or local_unsafe:
            said = remote_note if not verdict.safe else local_note
            reason = f"allowed (combine: both): only {said} found it unsafe"
            return Outcome(reason=reason, details=details)
        return Outcome(details=details)
    # either
    if not verdict.safe:
        also = f"; and per {local_note}" if local_unsafe else ""
        return Outcome(Verdict.BLOCK, f"unsafe {what} per {remote_note}{also}", details=details)
    if local_unsafe:
        reason = f"unsafe {what} per {local_note} (the remote safety model found it safe)"
        return Outcome(Verdict.BLOCK, reason, details=details)
    return Outcome(details=details)


@dataclass
class RemoteSafetyRail:
    model: RemoteSafetyModel
    local: ContentSafetyRail | None
    combine_as: str
    on_error: str

    async def remote(self, stage: str, text: str, question: str) -> Remote:
        try:
            judgement = await self.model.judge(stage, text, question)  # type: ignore[arg-type]
        except (RagrailError, UnreadableAnswer) as exc:
            JUDGEMENTS.labels(stage, "error").inc()
            message = exc.message if isinstance(exc, RagrailError) else f"unreadable answer: {exc}"
            log.warning(
                "remote safety model gave no verdict",
                extra={"stage": stage, "error": message, "error_type": type(exc).__name__},
            )
            return Remote(None, message)
        JUDGEMENTS.labels(stage, "safe" if judgement.verdict.safe else "unsafe").inc()
        LATENCY.labels(stage).observe(judgement.ms / 1000)
        return Remote(judgement)

    async def check(self, text: str, source: str, question: str) -> Outcome:
        stage = "input" if source == "input" else "output"
        if self.local is None or self.combine_as == "remote":
            return combine(
                self.what(stage),
                self.combine_as,
                self.on_error,
                await self.remote(stage, text, question),
                None,
            )
        local_rail = self.local
        remote, local = await asyncio.gather(
            self.remote(stage, text, question),
            asyncio.to_thread(local_rail.check, text, stage),
        )
        return combine(self.what(stage), self.combine_as, self.on_error, remote, local)

    @staticmethod
    def what(stage: str) -> str:
        return "request" if stage == "input" else "answer"


def server_settings(settings: RemoteSafetySettings) -> RemoteSafetySettings:
    """The settings with the key from remote_api_key_env when that names a variable and no
    key file or key is set."""
    name = settings.remote_api_key_env
    if not name or settings.remote_api_key_file or settings.remote_api_key.get_secret_value():
        return settings
    if name not in os.environ:
        raise FailedPrecondition(
            f"{SECTION}.remote_api_key_env names the environment variable {name}, which is not "
            "set; set it to the API key, or use remote_api_key_file"
        )
    return settings.model_copy(update={"remote_api_key": os.environ[name]})


def local_check(settings: RemoteSafetySettings, resources: Resources) -> ContentSafetyRail | None:
    """The local guard model's content-safety head, as custom_data.ragrail.content_safety
    sets it; None when combine is remote or no guard model is loaded (then the remote
    verdict alone decides, and the log says so)."""
    if settings.combine == "remote":
        return None
    flows = resources.flows
    doubled = [
        f"rails.{stage}.flows lists both `{local}` and `{OWN_FLOWS[stage]}`"
        for stage, local in LOCAL_FLOWS.items()
        if local in flows.get(stage, []) and OWN_FLOWS[stage] in flows.get(stage, [])  # type: ignore[call-overload]
    ]
    if doubled and settings.combine == "both":
        raise FailedPrecondition(
            f"{SECTION}.combine is both, and {'; '.join(doubled)}: the local content-safety "
            "rail would block on its own first. Remove it: the remote safety rail runs the "
            "local head itself"
        )
    if resources.guard is None:
        log.warning(
            "remote safety: no guard model loaded, so the remote verdict alone decides",
            extra={"combine": settings.combine},
        )
        return None
    return build(resources.sections.content_safety, resources)


def load(settings: RemoteSafetySettings, resources: Resources) -> LoadedRail:
    try:
        categories = categories_for(settings.format, settings.categories)
    except ValueError as exc:
        raise FailedPrecondition(f"{SECTION}.categories: {exc}") from exc
    server = RemoteServer(server_settings(settings), "remote safety rail", section=SECTION)
    max_tokens = settings.max_tokens or MAX_TOKENS[settings.format]
    model = RemoteSafetyModel(
        server, settings.format, categories, max_tokens, settings.remote_extra_body
    )
    rail = RemoteSafetyRail(
        model, local_check(settings, resources), settings.combine, settings.on_error
    )
    # An unexpected error (a bug, not the server) fails closed unless on_error is allow.
    unexpected = "allow" if settings.on_error == "allow" else "block"

    async def ragrail_remote_safety(
        text: str, source: str = "input", question: str = ""
    ) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            outcome = await rail.check(text, source, question)
        except Exception as exc:
            outcome = failed(RAIL, unexpected, exc)
        outcome.details["rail_ms"] = round((time.perf_counter() - started) * 1000, 3)
        return outcome.action_value()

    return LoadedRail(
        {"ragrail_remote_safety": ragrail_remote_safety},
        info={
            "remote_safety_url": server.base_url,
            "remote_safety_model": server.model or "(first listed by the server)",
            "remote_safety_format": settings.format,
            "remote_safety_combine": settings.combine if rail.local is not None else "remote",
            "remote_safety_on_error": settings.on_error,
        },
    )
