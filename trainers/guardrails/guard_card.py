"""The README.md model card of a guard model (trainers/guardrails/guard.py)."""

from __future__ import annotations

import json
from typing import Any


def guard_card(manifest: dict[str, Any]) -> str:
    m = manifest["metrics"]
    cal = m["calibration"]
    heads = manifest["heads"]
    rows = []
    for name in ("injection", "unsafe"):
        groups = cal[name]["groups"]
        held = ", ".join(f"{g} {v['fpr']:.3f} of {v['n']}" for g, v in sorted(groups.items()))
        set_by = f" (set by {cal[name]['set_by']})" if cal[name].get("set_by") else ""
        rows.append(
            f"| {name} | {heads[name]['threshold']:.4f} | held-out benign flagged: {held}{set_by} |"
        )
    domains = cal["document"]["domains"]
    held = ", ".join(
        f"{d} {v['dropped']:.3f} of {v['benign']}"
        + (f" (caught {v['caught']:.2f})" if "caught" in v else "")
        for d, v in sorted(domains.items())
    )
    rows.append(
        f"| document | {heads['document']['threshold']:.4f} | held-out passages dropped: {held} |"
    )
    test = ""
    if "test" in m:
        from trainers.guardrails.guard_eval import summary

        test = (
            "\n## Test splits (never used to choose anything)\n\n"
            + "\n".join(f"- {line}" for line in summary(m["test"]))
            + "\n"
        )
    train = m["train"]
    training = (
        f"{train['examples']} examples, {train['steps']} steps, "
        f"loss {train['loss_first']} → {train['loss_last']}"
    )
    timing = (
        f"{manifest['seconds']} s wall, {m.get('cpu_seconds')} s CPU; "
        f"{json.dumps(m.get('timings', {}))}"
    )
    return f"""# {manifest["name"]} / {manifest["version"]}

The guardrails service's classifiers as heads on one MiniLM (`shared/models/guard.py` loads
it): prompt injection / jailbreak, unsafe content with its hazard category
(MLCommons AILuminate / Llama Guard taxonomy), and instructions planted in a document
(scored per window of {heads["document"].get("window_chars", 500)} characters). One INT8
ONNX graph also outputs the packaged all-MiniLM-L6-v2 sentence embedding for the topic and
groundedness rails. Written by `python -m trainers.guardrails --all`.

| | |
| --- | --- |
| base | {manifest["base"]} |
| method | {manifest["method"]} |
| data | `{manifest["data"]["path"]}` |
| training | {training} |
| time | {timing} |
| created | {manifest["created_at"]} |

## Thresholds (chosen on held-out training data)

| head | threshold | |
| --- | --- | --- |
{chr(10).join(rows)}
{test}"""
