"""Speed-ups for NeMo Guardrails' Colang 1.0 runtime, with the same results.

Measured on this service's checks (2-core CPU), the Colang 1.0 runtime, not the rails, is
where most of a check's time goes under `LLMRails`, for three reasons this module removes:

* **Replay.** Each time the runtime decides the next step (`compute_next_steps`) it builds
  a fresh state and replays every event of the conversation so far through every flow; a
  check produces some 30 events, so a check replays ~500 events (quadratic in the events).
  `replaying_incrementally()` keeps the state between the steps of one `generate_async` call
  and feeds it only the events added since the previous step: the same state, reached once.
  It falls back to the full replay when the history is not the one it continued from or
  holds a `hide_prev_turn` (which rewrites history).
* **Expressions.** Every `$r.verdict == "block"` and `$i < len($input_flows)` a flow meets is
  rewritten with a regex, parsed by `ast`, and evaluated by a newly built `SimpleEval`: some
  400 evaluations per check. `eval_expression` here caches the rewrite and the parse per
  expression and reuses the evaluator (per thread); what is evaluated, with which names, is
  unchanged.
* **YARA.** The `injection detection` output rail compiles its YARA rules on every call;
  they are compiled once per rule set here.

`install()` applies the three to the nemoguardrails version they were written against
(`SUPPORTED`); on another it changes nothing and logs so. tests/guardrails checks that checks
give the same events, verdicts and activations with and without them.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

SUPPORTED = ("0.24.1",)
_VAR = re.compile(r"\$([a-zA-Z_][a-zA-Z0-9_]*)")


@dataclass
class _Replay:
    """The state reached after `done` events of `history` (the list object itself)."""

    history: list | None = None
    flow_configs: Any = None
    done: int = 0
    state: Any = None


_replay: contextvars.ContextVar[_Replay | None] = contextvars.ContextVar(
    "ragrail_colang_replay", default=None
)
_installed: dict[str, Any] = {}


@contextlib.contextmanager
def replaying_incrementally() -> Iterator[None]:
    """Within this block (one `generate_async` call, in this task), each next-step
    computation continues from the previous one's state instead of replaying the history."""
    token = _replay.set(_Replay())
    try:
        yield
    finally:
        _replay.reset(token)


def _compute_next_steps(
    history: list[dict],
    flow_configs: dict[str, Any],
    rails_config: Any,
    processing_log: list[dict],
) -> list[dict]:
    """nemoguardrails.colang.v1_0.runtime.flows.compute_next_steps (0.24.1), continuing from
    the state of the previous call in the same `replaying_incrementally()` block."""
    from nemoguardrails.colang.v1_0.runtime import flows
    from nemoguardrails.utils import new_event_dict

    replay = _replay.get()
    original = _installed["compute_next_steps"]
    if replay is None or any(e["type"] == "hide_prev_turn" for e in history[replay.done :]):
        if replay is not None:
            replay.history = None
        return original(  # type: ignore[no-any-return]
            history, flow_configs, rails_config=rails_config, processing_log=processing_log
        )
    if (
        replay.history is not history
        or replay.flow_configs is not flow_configs
        or replay.done > len(history)
    ):
        replay.history, replay.flow_configs, replay.done = history, flow_configs, 0
        replay.state = flows.State(
            context={}, flow_states=[], flow_configs=flow_configs, rails_config=rails_config
        )
    state = replay.state
    for event in history[replay.done :]:
        state = flows.compute_next_state(state, event)
        # As compute_next_steps: a "stop" bot intent resets every flow.
        if event["type"] == "BotIntent" and event["intent"] == "stop":
            state.flow_states = []
    replay.state, replay.done = state, len(history)

    # The rest is compute_next_steps' own, unchanged.
    next_steps = []
    if state.context_updates:
        next_steps.append(new_event_dict("ContextUpdate", data=state.context_updates))
    if state.next_step:
        next_step_event = flows._step_to_event(state.next_step)
        if next_step_event["type"] == "BotIntent" and state.next_step_comment:
            next_step_event["instructions"] = state.next_step_comment
        next_steps.append(next_step_event)
    if history:
        last_event = history[-1]
        if last_event["type"] == "BotIntent" and last_event["intent"] == "stop":
            next_steps = []
    if next_steps and state.next_step_by_flow_uid:
        for flow_state in state.flow_states:
            if flow_state.uid == state.next_step_by_flow_uid:
                processing_log.append(
                    {
                        "type": "step",
                        "timestamp": flows.time(),
                        "flow_id": flow_state.flow_id,
                        "next_steps": next_steps,
                    }
                )
    return next_steps


_evaluators = threading.local()


@functools.lru_cache(maxsize=4096)
def _parsed(expr: str) -> tuple[str, tuple[str, ...], Any]:
    from simpleeval import SimpleEval

    updated = _VAR.sub(r"var_\1", expr)
    names = tuple(dict.fromkeys(_VAR.findall(expr)))
    return updated, names, SimpleEval.parse(updated)


def _evaluator() -> Any:
    evaluator = getattr(_evaluators, "value", None)
    if evaluator is None:
        from simpleeval import SimpleEval

        evaluator = SimpleEval(functions={"len": len})
        _evaluators.value = evaluator
    return evaluator


def eval_expression(expr: Any, context: dict) -> Any:
    """nemoguardrails.colang.v1_0.runtime.eval.eval_expression (0.24.1) with the rewrite and
    parse cached per expression and the evaluator reused."""
    from nemoguardrails.colang.v1_0.runtime.utils import AttributeDict

    if expr is None:
        return None
    if not isinstance(expr, str):
        assert isinstance(expr, (bool, int))
        return expr
    try:
        updated, var_names, tree = _parsed(expr)
    except Exception as ex:
        raise Exception(f"Error evaluating '{expr}': {ex!s}") from ex
    names = {}
    for var_name in var_names:
        val = context.get(var_name)
        if isinstance(val, dict):
            val = AttributeDict(val)
        names[f"var_{var_name}"] = val
    evaluator = _evaluator()
    evaluator.names = names
    try:
        return evaluator.eval(updated, previously_parsed=tree)
    except Exception as ex:
        raise Exception(f"Error evaluating '{expr}': {ex!s}") from ex
    finally:
        evaluator.names = {}


def _cached_rules(load: Any) -> Any:
    cache: dict[Any, Any] = {}
    lock = threading.Lock()

    def load_rules(yara_path: Any, rule_names: Any, yara_rules: Any = None) -> Any:
        key = (
            str(yara_path),
            tuple(rule_names),
            tuple(sorted((yara_rules or {}).items())),
        )
        with lock:
            if key not in cache:
                cache[key] = load(yara_path, rule_names, yara_rules)
            return cache[key]

    return load_rules


def install() -> bool:
    """Applies the speed-ups once per process; False (and nothing changed) on a
    nemoguardrails version they were not written for."""
    if _installed:
        return True
    import nemoguardrails
    from nemoguardrails.colang.v1_0.runtime import eval as colang_eval
    from nemoguardrails.colang.v1_0.runtime import flows, runtime, sliding
    from nemoguardrails.library.injection_detection import actions as injection

    version = getattr(nemoguardrails, "__version__", "")
    if version not in SUPPORTED:
        log.warning(
            "NeMo Guardrails speed-ups not applied: written for nemoguardrails %s, found %s",
            ", ".join(SUPPORTED),
            version,
        )
        return False
    _installed["compute_next_steps"] = runtime.compute_next_steps
    _installed["eval_expression"] = colang_eval.eval_expression
    _installed["load_rules"] = injection._load_rules
    runtime.compute_next_steps = _compute_next_steps
    for module in (colang_eval, flows, runtime, sliding):
        if getattr(module, "eval_expression", None) is _installed["eval_expression"]:
            module.eval_expression = eval_expression
    injection._load_rules = _cached_rules(_installed["load_rules"])
    return True


def uninstall() -> None:
    """Puts the originals back (for tests comparing both)."""
    if not _installed:
        return
    from nemoguardrails.colang.v1_0.runtime import eval as colang_eval
    from nemoguardrails.colang.v1_0.runtime import flows, runtime, sliding
    from nemoguardrails.library.injection_detection import actions as injection

    runtime.compute_next_steps = _installed["compute_next_steps"]
    for module in (colang_eval, flows, runtime, sliding):
        if getattr(module, "eval_expression", None) is eval_expression:
            module.eval_expression = _installed["eval_expression"]
    injection._load_rules = _installed["load_rules"]
    _installed.clear()
