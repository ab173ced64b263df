"""What a rail is, and the helpers its actions share. Nothing here knows a particular rail.

A rail is one folder under services/guardrails/rails/ (NeMo Guardrails' `library/<rail>/`
layout), registered once in rails/__init__.py:

    rails/<rail>/settings.py   its options: a RailSettings model, the `custom_data.ragrail.<rail>`
                               section of config.yml (typed: a misspelt key stops the service)
    rails/<rail>/actions.py    the check (no NeMo Guardrails dependency) and `load()`, which
                               builds it from its settings and the shared Resources and returns
                               the NeMo Guardrails actions that run it
    rails/<rail>/flows.co      the Colang 1.0 flow(s) that execute those actions
    rails/<rail>/__init__.py   RAIL = Rail(...): the spec both engines read

The `nemo` engine adds every rail's flows.co to the NeMo Guardrails configuration and registers
its actions; the `direct` engine calls the same actions, in the configured order, as each
Flow of the spec says the Colang flow does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from shared.verdict import Verdict

if TYPE_CHECKING:
    from services.guardrails.railset import VectorCache
    from services.guardrails.settings import GuardrailsSettings
    from shared.models.classifier import InjectionClassifier
    from shared.models.guard import GuardModel, ScoreCache

log = logging.getLogger(__name__)

Stage = Literal["input", "retrieval", "output"]
STAGES: tuple[Stage, ...] = ("input", "retrieval", "output")
OnError = Literal["block", "allow"]
Action = Callable[..., Awaitable[dict[str, Any]]]
Embed = Callable[[list[str]], np.ndarray]

# The Colang variables a flow of each stage reads, and what the direct engine passes for them:
# the text being checked (the user's message on input, the answer on output), the retrieved
# chunks (a list, None where a chunk was dropped), and the context an answer is grounded on.
TEXT_VARIABLES = ("$user_message", "$bot_message")
CHUNKS_VARIABLE = "$ragrail_chunks"
# True when the caller grounded the answer in $ragrail_context itself (CheckOutputRequest.grounded).
GROUNDED_VARIABLE = "$ragrail_grounded"
CONTEXT_VARIABLE = "$ragrail_context"
DEFAULT_PARAMS: dict[Stage, dict[str, str]] = {
    "input": {"text": "$user_message"},
    "output": {"text": "$bot_message"},
    "retrieval": {"chunks": CHUNKS_VARIABLE},
}


# NeMo Guardrails' RailOutcome decisions (its library rails) as verdicts.
NEMO_DECISIONS = {"allow": Verdict.ALLOW, "block": Verdict.BLOCK, "transform": Verdict.MODIFY}


@dataclass
class Outcome:
    """What one check of one rail found."""

    verdict: Verdict = Verdict.ALLOW
    reason: str = ""
    # The text to use instead, when verdict is modify.
    text: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    errored: bool = False

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)  # a rail may say "block"

    # -- the NeMo Guardrails boundary: an action's return value, both ways. Actions return
    # plain dicts, as Colang flows read them ($r.verdict == "block", $r.text); the engines
    # read every action's value back here, ragrail's and NeMo Guardrails' library rails'.

    def action_value(self) -> dict[str, Any]:
        """What an action returns to its Colang flow ($r.verdict, $r.text, ...)."""
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "text": self.text,
            "details": self.details,
            "errored": self.errored,
        }

    @classmethod
    def of_action_value(cls, value: Any) -> Outcome:
        """An action's return value read back: a ragrail outcome (action_value, or a
        retrieval action's, which has no text), or NeMo Guardrails' RailOutcome (its library
        rails, e.g. injection detection: a decision, the text in its metadata). Anything
        else, None included, allows."""
        if isinstance(value, dict) and "verdict" in value:
            text = value.get("text")
            return cls(
                Verdict(value["verdict"]),
                str(value.get("reason") or ""),
                None if text is None else str(text),
                dict(value.get("details") or {}),
                bool(value.get("errored")),
            )
        decision = getattr(value, "decision", None)
        if decision is not None:
            meta = dict(getattr(value, "metadata", {}) or {})
            detections = meta.get("detections") or []
            reason = value.reason or (
                f"YARA rules matched: {', '.join(detections)}" if detections else ""
            )
            text = meta.get("text")
            return cls(
                NEMO_DECISIONS[decision.value],
                reason,
                None if text is None else str(text),
                errored=bool(getattr(value, "failed", False)),
            )
        return cls()


class RailSettings(BaseModel):
    """A rail's section of `custom_data.ragrail` in config.yml."""

    model_config = ConfigDict(extra="forbid")
    # A rail that raises blocks ("block", fail closed) or lets the text through ("allow",
    # fail open); either way the answer reports it as errored.
    on_error: OnError = "block"


@dataclass(frozen=True)
class Flow:
    """One Colang flow of a rail's flows.co, as the direct engine runs it: the flow executes
    `action` with `params` (Colang variables such as $user_message, or literal strings); on
    input and output a "block" stops the remaining rails and a "modify" replaces the text
    they see, on retrieval the action returns the new chunk list. tests/guardrails checks
    that flows.co says the same."""

    name: str
    stage: Stage
    action: str
    # Empty: the stage's text ($user_message, $bot_message) or chunks ($ragrail_chunks).
    params: Mapping[str, str] = field(default_factory=dict)
    # The flow embeds the user's message with the general sentence encoder (topics): a rail
    # that runs earlier on a worker thread may embed it ahead (Resources.embeds_ahead).
    general_vectors: bool = False
    # The action is a local, pure function of its parameters that reads no cache an earlier
    # flow fills (a model run, Presidio): the engines may start it on the check's own text
    # as the check begins, beside the flows before it (services/guardrails/speculation.py).
    speculative: bool = False

    @classmethod
    def with_source(
        cls,
        name: str,
        stage: Literal["input", "output"],
        action: str,
        *,
        speculative: bool = False,
    ) -> Flow:
        """A flow of a rail that checks both the message and the answer and is told which:
        the stage's text as `text`, the stage's name as `source`."""
        params = {**DEFAULT_PARAMS[stage], "source": stage}
        return cls(name, stage, action, params, speculative=speculative)

    def call_params(self) -> dict[str, str]:
        return dict(self.params) or dict(DEFAULT_PARAMS[self.stage])

    def bind(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The action's arguments: each Colang variable of call_params replaced by its value
        in `values` (as the flow's `execute` passes it), literals as they are."""
        return {
            key: values[value] if value.startswith("$") else value
            for key, value in self.call_params().items()
        }


@dataclass
class LoadedRail:
    """A rail ready to run: its NeMo Guardrails actions by name, and what it adds to the
    service's Info details (thresholds, models)."""

    actions: dict[str, Action]
    info: dict[str, str] = field(default_factory=dict)


@dataclass
class Resources:
    """What the service loads once and every rail may use."""

    settings: GuardrailsSettings
    rails_config: Any  # nemoguardrails.RailsConfig
    config_file: Path
    # The guard model when one is trained (reported in Info, paired with the embedding
    # model), else the single-head injection classifier of the older recipe; None before
    # either is trained (the general encoder is then the packaged MiniLM).
    classifier: InjectionClassifier | GuardModel | None
    # The classifier's encoder and the general sentence encoder (config.yml's embedding
    # model), each behind a cache of recent texts; the same object when they are one model.
    classifier_vectors: VectorCache
    general_vectors: VectorCache
    # The general encoder uncached, for texts that rarely repeat (context windows).
    embed_general: Embed
    flows: dict[Stage, list[str]]
    # Input flows that embed the message with the general encoder (Flow.general_vectors).
    general_vector_flows: frozenset[str] = frozenset()
    # The guard model (shared/models/guard.py: injection, content-safety and document heads
    # on one graph) behind a cache of recent texts; None with an older classifier.
    guard: ScoreCache | None = None
    # No model configured and no guard model trained yet: the rails that need it (Rail.needs)
    # are loaded pending, allowing with the reason, until a reload finds one.
    pending: bool = False
    # Every rail's validated `custom_data.ragrail` section (rail_config.RagrailRails), for a
    # rail that builds on another's check (remote safety on content safety's).
    sections: Any = None

    def embeds_ahead(self, flow: str) -> bool:
        """Whether the input flow `flow` should also embed the message with the general
        encoder on its worker thread: a later configured input flow needs that vector and
        the general encoder is not the one `flow` already ran."""
        if self.general_vectors is self.classifier_vectors:
            return False
        flows = self.flows["input"]
        if flow not in flows:
            return False
        return any(f in self.general_vector_flows for f in flows[flows.index(flow) + 1 :])


Loader = Callable[[Any, Resources], LoadedRail]


@dataclass(frozen=True)
class Rail:
    """A rail's spec: its name (its `custom_data.ragrail.<name>` section), its settings
    model, its flows, and `load(settings, resources) -> LoadedRail`. A rail is loaded when
    one of its flows is configured in config.yml's `rails:`."""

    name: str
    settings: type[RailSettings] | None
    flows: tuple[Flow, ...]
    load: Loader
    # The folder holding flows.co; None for NeMo Guardrails library flows (from_nemo).
    folder: Path | None = None
    # The flows and actions are NeMo Guardrails' own (its library): the nemo engine runs them
    # from there and registers nothing; `load` gives the direct engine the same actions.
    from_nemo: bool = False
    # The model it runs on: "guard" (the guard model), "classifier" (the guard model or the
    # older injection classifier), "" (none, or one it loads itself). Until that model is
    # trained the rail is loaded pending (railset.pending_rail) instead of `load`.
    needs: Literal["", "guard", "classifier"] = ""

    @property
    def flows_file(self) -> Path | None:
        return None if self.folder is None else self.folder / "flows.co"


def input_rail(name: str, settings: type[RailSettings], load: Loader, folder: Path) -> Rail:
    """The spec of a rail of one input flow named after the rail, as docs/adding-a-rail.md
    builds `max_urls` in full: flow `ragrail <name>` (underscores as spaces) executing the
    action `ragrail_<name>` on the user's message."""
    flow = Flow(f"ragrail {name.replace('_', ' ')}", "input", f"ragrail_{name}")
    return Rail(name=name, settings=settings, flows=(flow,), load=load, folder=folder)


# -- helpers for actions -------------------------------------------------------------------


def failed(rail: str, on_error: str, exc: BaseException) -> Outcome:
    log.error("rail failed", exc_info=exc, extra={"rail": rail, "on_error": on_error})
    side = "failing closed" if on_error == "block" else "failing open"
    return Outcome(
        Verdict.BLOCK if on_error == "block" else Verdict.ALLOW,
        f"rail error ({type(exc).__name__}), {side} as configured (on_error: {on_error})",
        errored=True,
    )


async def guarded(
    rail: str, on_error: str, fn: Callable[[], Outcome], inline: bool = False
) -> dict[str, Any]:
    """fn() on a worker thread (models must not stall the event loop), or in the loop when
    `inline` (rails that take microseconds: a thread hand-off costs more than they do);
    errors contained. Returns the outcome as the action's value, timed."""
    started = time.perf_counter()
    try:
        outcome = fn() if inline else await asyncio.to_thread(fn)
    except Exception as exc:
        outcome = failed(rail, on_error, exc)
    outcome.details["rail_ms"] = round((time.perf_counter() - started) * 1000, 3)
    return outcome.action_value()


def chunk_action(rail: str, on_error: str, check: Callable[[list[str]], list[Outcome]]) -> Action:
    """A retrieval action: runs `check` on a worker thread on the chunks still present
    (None marks a dropped one); a blocked chunk is dropped, a modified one replaced. Returns
    the new list and one outcome per chunk."""

    def run(chunks: list[str | None]) -> dict[str, Any]:
        live = [i for i, c in enumerate(chunks) if c is not None]
        try:
            results = check([str(chunks[i]) for i in live])
        except Exception as exc:
            results = [failed(rail, on_error, exc)] * len(live)
        outcomes: list[dict[str, Any] | None] = [None] * len(chunks)
        new = list(chunks)
        for i, outcome in zip(live, results, strict=True):
            outcomes[i] = outcome.action_value()
            if outcome.verdict == Verdict.BLOCK:
                new[i] = None
            elif outcome.verdict == Verdict.MODIFY:
                new[i] = outcome.text
        changed = sum(1 for o in results if o.verdict != Verdict.ALLOW)
        return {
            "verdict": (Verdict.MODIFY if changed else Verdict.ALLOW).value,
            "reason": f"{changed} of {len(live)} chunk(s) dropped or changed" if changed else "",
            "chunks": new,
            "outcomes": outcomes,
        }

    async def action(chunks: list[str | None] | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(run, list(chunks or []))

    return action
