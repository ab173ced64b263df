"""Runs the configured rails on a check: through NeMo Guardrails' LLMRails (engine `nemo`),
or the same rails called in the configured order without it (engine `direct`).

With `nemo`, each check is one `generate_async` with `options={"rails": [...], "log":
{"activated_rails": True}}`; which rail blocked or changed the text, why, and how long it
took come from the activated-rails log (the actions' return values and the rails'
durations). Retrieval checks run the config's `rails.retrieval.flows` as the input rails of a
second LLMRails built from the same config (NeMo Guardrails runs retrieval rails only inside
its own retrieval step), with the chunks in the context variable `$ragrail_chunks`.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from services.guardrails import colang
from services.guardrails import llm as ragrail_llm
from services.guardrails.nemo_runtime import NoHistory, prune_library_flows
from services.guardrails.rails.base import (
    CHUNKS_VARIABLE,
    CONTEXT_VARIABLE,
    GROUNDED_VARIABLE,
    TEXT_VARIABLES,
    Flow,
    Outcome,
)
from services.guardrails.railset import RailSet
from services.guardrails.results import Activation, Check, decide
from services.guardrails.speculation import served, speculating
from shared.errors import FailedPrecondition
from shared.verdict import Verdict

log = logging.getLogger(__name__)
NO_QUERY = "(no query)"
# NeMo Guardrails library flows that prompt the LLM (config.yml `models`, type main).
LLM_FLOW_PREFIXES = ("self check",)
# A check's conversation, as the service passes it: {"role", "content"} dicts, oldest first.
Messages = list[dict[str, str]]


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def flow_values(
    text: str = "",
    context: Any = (),
    chunks: Any = (),
    question: str | None = None,
    grounded: bool = False,
) -> dict[str, Any]:
    """The Colang variables a ragrail flow reads, as a check sets them: the text being
    checked, the context, the chunks, and whether the caller grounded the answer. On output,
    $user_message is the user's question (`question`), as in NeMo Guardrails."""
    values: dict[str, Any] = {
        CONTEXT_VARIABLE: list(context),
        CHUNKS_VARIABLE: list(chunks),
        GROUNDED_VARIABLE: grounded,
    }
    values.update(dict.fromkeys(TEXT_VARIABLES, text))
    if question is not None:
        values["$user_message"] = question
    return values


def last_question(messages: Messages) -> str:
    """What an output check takes for the user's question: the last user message."""
    users = [m["content"] for m in messages if m.get("role") == "user"]
    return users[-1] if users else NO_QUERY


class Engine(ABC):
    name: str
    speedups = False  # the Colang runtime speed-ups are in use (colang.py; nemo engine only)

    def __init__(self, rails_config: Any, railset: RailSet, speedups: bool = True) -> None:
        self.config = rails_config
        self.railset = railset
        self.input_rails = list(rails_config.rails.input.flows)
        self.retrieval_rails = list(rails_config.rails.retrieval.flows)
        self.output_rails = list(rails_config.rails.output.flows)
        # What speculation.py starts: each stage's flows of registered rails, and the rails'
        # own actions (the engines call them wrapped in `served`).
        self.rail_actions = railset.actions()
        self.known_flows = {
            stage: [railset.flows[f][1] for f in flows if f in railset.flows]
            for stage, flows in (
                ("input", self.input_rails),
                ("retrieval", self.retrieval_rails),
                ("output", self.output_rails),
            )
        }

    def speculating(self, stage: str, values: dict[str, Any]) -> Any:
        """The stage's speculative flows started (speculation.py), bound to `values`."""
        return speculating(self.known_flows[stage], self.rail_actions, values)

    @abstractmethod
    async def check_input(self, messages: Messages) -> Check: ...

    @abstractmethod
    async def check_retrieval(self, query: str, chunks: list[str]) -> list[Check]: ...

    @abstractmethod
    async def check_output(
        self, messages: Messages, answer: str, context: list[str], grounded: bool = False
    ) -> Check:
        """`grounded`: the caller found every sentence of the answer supported by `context`
        (the grounding rail takes that instead of scoring it again)."""


def engine_failed(stage: str, exc: BaseException) -> Check:
    """NeMo Guardrails itself raised: nothing was checked, so the check fails closed."""
    log.error("guardrails engine failed", exc_info=exc, extra={"stage": stage})
    reason = f"the {stage} rails could not run ({type(exc).__name__}); failing closed"
    return Check(
        Verdict.BLOCK,
        "guardrails",
        reason,
        "",
        [Activation("guardrails", Verdict.BLOCK, reason, 0, True)],
    )


def chunk_checks(
    chunks: list[str], final: list[str | None], per_rail: list[tuple[str, float, list]]
) -> list[Check]:
    checks = []
    for i, original in enumerate(chunks):
        activations = []
        for rail, ms, outcomes in per_rail:
            value = outcomes[i] if i < len(outcomes) else None
            if value is None:
                continue  # dropped by an earlier rail
            outcome = Outcome.of_action_value(value)
            activations.append(
                Activation(rail, outcome.verdict, outcome.reason, ms, outcome.errored)
            )
        text = final[i] if i < len(final) else None
        check = decide(original, original if text is None else text, activations)
        check.ms = round(sum(a.ms for a in activations), 3)
        checks.append(check)
    return checks


class NemoEngine(Engine):
    name = "nemo"

    def __init__(self, rails_config: Any, railset: RailSet, speedups: bool = True) -> None:
        from nemoguardrails import LLMRails

        super().__init__(rails_config, railset, speedups)
        self.speedups = speedups and colang.install()
        ragrail_llm.register()
        # The rails' flows are in rails_config (rail_config.add_rail_flows); their actions:
        actions = railset.actions(from_nemo=False)
        self.llmrails = LLMRails(rails_config)
        self.llm = self.llmrails.llm
        needs_llm = [
            f for f in self.input_rails + self.output_rails if f.startswith(LLM_FLOW_PREFIXES)
        ]
        if needs_llm and self.llm is None:
            raise FailedPrecondition(
                f"the rails {needs_llm} prompt an LLM, and config.yml configures none: add a "
                "`models` entry `type: main` (e.g. `engine: ragrail_generator`, `model: "
                "default`, `parameters: {url: 127.0.0.1:50055}`; services/guardrails/README.md"
                ", LLM rails) or remove those rails"
            )
        if self.llm is not None:
            log.info(
                "LLM for the LLM rails",
                extra={
                    "provider": getattr(self.llm, "provider_name", ""),
                    "url": getattr(self.llm, "provider_url", ""),
                    "rails": needs_llm,
                },
            )
        for name, fn in actions.items():
            self.llmrails.register_action(served(name, fn), name)
        retrieval_config = rails_config.model_copy(deep=True)
        retrieval_config.rails.input.flows = list(self.retrieval_rails)
        retrieval_config.rails.output.flows = []
        retrieval_config.rails.retrieval.flows = []
        self.retrieval = LLMRails(retrieval_config)
        for name, fn in actions.items():
            self.retrieval.register_action(served(name, fn), name)
        self.llmrails.events_history_cache = NoHistory()
        self.retrieval.events_history_cache = NoHistory()
        dropped = prune_library_flows(self.llmrails, self.input_rails + self.output_rails)
        prune_library_flows(self.retrieval, self.retrieval_rails)
        log.info("unused NeMo Guardrails library flows left out", extra={"flows": dropped})

    async def _run(
        self,
        llmrails: Any,
        messages: list[dict[str, Any]],
        rails: list[str],
        failures: list[tuple[str, str]],
    ) -> Any:
        """LLMRails on the messages; LLM calls that fail meanwhile add (task, why) to
        `failures`."""
        options = {"rails": rails, "log": {"activated_rails": True}}
        with ragrail_llm.recording_failures(failures):
            if not self.speedups:
                return await llmrails.generate_async(messages=messages, options=options)
            with colang.replaying_incrementally():
                return await llmrails.generate_async(messages=messages, options=options)

    @staticmethod
    def _failed(
        stage: str, flows: list[str], exc: BaseException, failures: list[tuple[str, str]]
    ) -> Check:
        """generate_async raised. An LLM rail whose model call failed ends up here (NeMo
        Guardrails passes LLM errors on): the check is blocked in that rail's name, with why
        the model did not answer. Anything else is the engine failing."""
        if not failures:
            return engine_failed(stage, exc)
        task, message = failures[-1]
        flow = task.split(" ")[0].replace("_", " ")
        rail = flow if flow in flows else "guardrails"
        reason = f"{message}; failing closed"
        log.error("LLM rail failed", extra={"rail": rail, "stage": stage, "error": message})
        return Check(
            Verdict.BLOCK, rail, reason, "", [Activation(rail, Verdict.BLOCK, reason, 0, True)]
        )

    @staticmethod
    def _activations(response: Any, failures: Sequence[tuple[str, str]] = ()) -> list[Activation]:
        out = []
        for rail in response.log.activated_rails:
            verdict, reason, errored = Verdict.ALLOW, "", False
            values = [a.return_value for a in rail.executed_actions if a.return_value is not None]
            llm_calls = [c for a in rail.executed_actions for c in a.llm_calls]
            if values:
                outcome = Outcome.of_action_value(values[0])
                verdict, reason, errored = outcome.verdict, outcome.reason, outcome.errored
                if llm_calls and not reason:
                    # An LLM rail: its verdict is the model's answer.
                    reason = "; ".join(
                        f"{c.llm_provider_name} ({c.llm_model_name}) answered "
                        f"{(c.completion or '').strip()[:200]!r}"
                        for c in llm_calls
                    )
            elif rail.executed_actions:
                # The rail's action raised inside NeMo Guardrails, which logged it and
                # stopped the flow: no verdict came back.
                errored = True
                names = {a.action_name for a in rail.executed_actions}
                why = [m for task, m in failures if task.split(" ")[0] in names]
                reason = (
                    f"{'; '.join(why)}; failing closed"
                    if why
                    else "the rail's action raised (see the service log); failing closed"
                )
            # A rail whose action raised gave no verdict: blocked. One that returned an
            # errored outcome (on_error: allow) keeps the verdict it chose.
            if rail.stop or (errored and not values):
                verdict = Verdict.BLOCK
            out.append(
                Activation(
                    rail.name, verdict, reason, round((rail.duration or 0) * 1000, 3), errored
                )
            )
        return out

    @staticmethod
    def _content(response: Any) -> str:
        messages = response.response
        if isinstance(messages, list) and messages:
            return str(messages[-1].get("content") or "")
        return str(messages or "")

    async def _check(
        self,
        stage: str,
        conversation: list[dict[str, Any]],
        text: str,
        values: dict[str, Any],
        started: float,
    ) -> Check:
        """An input or output check (`stage`): `conversation` through the stage's rails, `text`
        the text checked, `values` its flows' variables (speculation.py); timed from
        `started`."""
        rails = self.input_rails if stage == "input" else self.output_rails
        failures: list[tuple[str, str]] = []
        try:
            with self.speculating(stage, values):
                response = await self._run(self.llmrails, conversation, [stage], failures)
        except Exception as exc:
            check = self._failed(stage, rails, exc, failures)
        else:
            check = decide(text, self._content(response), self._activations(response, failures))
        check.ms = _ms(started)
        return check

    async def check_input(self, messages: Messages) -> Check:
        started = time.perf_counter()
        if not self.input_rails:
            return Check(ms=_ms(started))
        text = messages[-1]["content"]
        return await self._check("input", messages, text, flow_values(text), started)

    async def check_output(
        self, messages: Messages, answer: str, context: list[str], grounded: bool = False
    ) -> Check:
        started = time.perf_counter()
        if not self.output_rails:
            return Check(ms=_ms(started))
        variables = {"ragrail_context": list(context), "ragrail_grounded": grounded}
        history = [{"role": "context", "content": variables}]
        history += messages or [{"role": "user", "content": NO_QUERY}]
        history.append({"role": "assistant", "content": answer})
        values = flow_values(answer, context, (), last_question(messages), grounded)
        return await self._check("output", history, answer, values, started)

    async def check_retrieval(self, query: str, chunks: list[str]) -> list[Check]:
        if not self.retrieval_rails or not chunks:
            return [Check() for _ in chunks]
        history = [
            {"role": "context", "content": {"ragrail_chunks": list(chunks)}},
            {"role": "user", "content": query or NO_QUERY},
        ]
        try:
            with self.speculating("retrieval", flow_values(chunks=chunks)):
                response = await self._run(self.retrieval, history, ["input"], [])
        except Exception as exc:
            return [engine_failed("retrieval", exc) for _ in chunks]
        per_rail: list[tuple[str, float, list]] = []
        final: list[str | None] = list(chunks)
        for rail in response.log.activated_rails:
            value = next(
                (a.return_value for a in rail.executed_actions if a.return_value is not None), None
            )
            if isinstance(value, dict) and "outcomes" in value:
                per_rail.append(
                    (rail.name, round((rail.duration or 0) * 1000, 3), value["outcomes"])
                )
                final = list(value["chunks"])
        return chunk_checks(chunks, final, per_rail)


class DirectEngine(Engine):
    """The same flows, in the same order, called without LLMRails: each flow's action as its
    rail's spec says the flow executes it (services/guardrails/rails/). A config naming a
    flow no registered rail has (an LLM rail) cannot run here and is refused."""

    name = "direct"

    def __init__(self, rails_config: Any, railset: RailSet, speedups: bool = True) -> None:
        super().__init__(rails_config, railset, speedups)
        self.actions = {name: served(name, fn) for name, fn in railset.actions().items()}
        self.flows: dict[str, Flow] = {}
        for stage, flows in (
            ("input", self.input_rails),
            ("retrieval", self.retrieval_rails),
            ("output", self.output_rails),
        ):
            known = {name for name, (_, f) in railset.flows.items() if f.stage == stage}
            unknown = [f for f in flows if f not in known]
            if unknown:
                raise FailedPrecondition(
                    f"engine direct cannot run the {stage} flows {unknown} (it knows "
                    f"{sorted(known)}); use RAGRAIL_GUARDRAILS_ENGINE=nemo"
                )
            self.flows.update((name, railset.flows[name][1]) for name in flows)
        variables = {*TEXT_VARIABLES, CONTEXT_VARIABLE, CHUNKS_VARIABLE, GROUNDED_VARIABLE}
        for flow in self.flows.values():
            odd = [
                v for v in flow.call_params().values() if v.startswith("$") and v not in variables
            ]
            if odd:
                raise FailedPrecondition(
                    f"engine direct cannot run the flow '{flow.name}': it reads {odd}, and only "
                    f"{sorted(variables)} are known; use RAGRAIL_GUARDRAILS_ENGINE=nemo"
                )

    async def _call(self, flow: Flow, values: dict[str, Any]) -> dict[str, Any] | Any:
        """The flow's action with the flow's parameters: its Colang variables replaced by
        `values`, the text, context or chunks of this check (flow_values)."""
        return await self.actions[flow.action](**flow.bind(values))

    async def _chain(
        self,
        stage: str,
        text: str,
        context: list[str],
        question: str | None = None,
        grounded: bool = False,
    ) -> Check:
        started = time.perf_counter()
        original, activations = text, []
        flows = self.input_rails if stage == "input" else self.output_rails
        with self.speculating(stage, flow_values(text, context, (), question, grounded)):
            for flow in flows:
                t = time.perf_counter()
                try:
                    values = flow_values(text, context, (), question, grounded)
                    value = await self._call(self.flows[flow], values)
                    outcome = Outcome.of_action_value(value)
                except Exception as exc:  # NeMo's library action; ours never raise
                    log.error("rail failed", exc_info=exc, extra={"rail": flow})
                    outcome = Outcome(
                        Verdict.BLOCK,
                        f"rail error ({type(exc).__name__}), failing closed",
                        errored=True,
                    )
                activations.append(
                    Activation(flow, outcome.verdict, outcome.reason, _ms(t), outcome.errored)
                )
                if outcome.verdict == Verdict.BLOCK:
                    break
                if outcome.verdict == Verdict.MODIFY and outcome.text is not None:
                    text = outcome.text
        check = decide(original, text, activations)
        check.ms = _ms(started)
        return check

    async def check_input(self, messages: Messages) -> Check:
        return await self._chain("input", messages[-1]["content"], [])

    async def check_output(
        self, messages: Messages, answer: str, context: list[str], grounded: bool = False
    ) -> Check:
        return await self._chain(
            "output", answer, context, question=last_question(messages), grounded=grounded
        )

    async def check_retrieval(self, query: str, chunks: list[str]) -> list[Check]:
        current: list[str | None] = list(chunks)
        per_rail: list[tuple[str, float, list]] = []
        with self.speculating("retrieval", flow_values(chunks=chunks)):
            for flow in self.retrieval_rails:
                t = time.perf_counter()
                value = await self._call(self.flows[flow], flow_values(chunks=current))
                per_rail.append((flow, _ms(t), value["outcomes"]))
                current = list(value["chunks"])
        return chunk_checks(chunks, current, per_rail)


ENGINES = {"nemo": NemoEngine, "direct": DirectEngine}
