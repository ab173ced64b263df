"""Each guard head's threshold, chosen with the served INT8 graph on the held-out part of
the data (step 5 of trainers/guardrails/guard.py's recipe), never on a test split.

Prompt heads: held-out benign prompts come from several public sources (clinc150, nq_open,
chatterbot, self-instruct, COVID-QA, XQuAD, CyberSecEval's FRR set, the rows written for the
project); each belongs to a calibration group with a false-positive budget (`TARGETS`). The
threshold is the lowest at which
  * every group, all its sources pooled, stays within its budget, and
  * every source with at least `SOURCE_MIN_ROWS` held-out rows, on its own, stays within
    `SOURCE_FACTOR` times its group's budget (no one source may take the whole budget, so a
    source unlike the others cannot hide behind a large one),
plus `--margin`. Round two's rule held chit-chat to no false positive at all: its threshold
was then the single highest of 324 chit-chat rows (3.935 against 3.18 or less from every other
group), and unsafe recall on the test splits fell 0.933 -> 0.915. One row is noise; a budget
over several hundred rows from several sources is a rate. The report gives every group's and
every source's held-out rate at the chosen threshold, and which constraint set it.

Document head: whole held-out passages (each as its worst window), every domain within
`--document-fpr`.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from typing import Any

import numpy as np

from trainers.guardrails.guard_data import GuardData
from trainers.guardrails.scoring import threshold_at_fpr

# False-positive budgets per group of held-out benign text, per head. `sensitive` is the
# ordinary requests that contain words such as kill or bomb, and benign security requests
# that sound malicious. Chit-chat has the strict budget of ordinary requests (it was 0: one
# row set the threshold, above).
TARGETS: dict[str, dict[str, float]] = {
    "injection": {
        "instructions": 0.005,
        "questions": 0.005,
        "chitchat": 0.005,
        "in_domain": 0.005,
    },
    "unsafe": {
        "instructions": 0.005,
        "questions": 0.005,
        "chitchat": 0.005,
        "in_domain": 0.005,
        "sensitive": 0.02,
    },
}
# Groups measured on held-out data but not held to a target (`lookalikes`: benign requests
# built to look like injections, about passwords, roles, "instructions"; `deepset`:
# deepset's benign prompts). Holding the threshold to a few dozen deliberately hard rows set
# it by one or two of them (measured: unsafe recall 0.58 at the threshold they gave against
# 0.8 without).
SOURCE_MIN_ROWS = 100
SOURCE_FACTOR = 2.0
DOCUMENT_FPR = 0.01


def origin(source: str) -> str:
    """The public source of a row named `<set>/<source>`: the same data set reaches several
    sets (clinc150 rows are in benign_instructions, content_safety and injections_extra)."""
    return source.split("/", 1)[-1]


def _at(values: list[float], budget: float) -> float:
    v = np.asarray(values, dtype=np.float32)
    return threshold_at_fpr(v, np.zeros(len(v), dtype=np.int8), budget)


def prompt_threshold(
    benign: dict[str, dict[str, list[float]]], targets: dict[str, float], margin: float = 0.0
) -> tuple[float, dict[str, Any]]:
    """The threshold for benign scores by group, then by source, under the rule above, and its
    report (per group and per source: rows, budget, own threshold, rate at the chosen one)."""
    constraints: dict[str, float] = {}
    groups: dict[str, Any] = {}
    sources: dict[str, Any] = {}
    for group, by_source in sorted(benign.items()):
        pooled = [x for values in by_source.values() for x in values]
        groups[group] = {"n": len(pooled), "sources": len(by_source)}
        for name, values in sorted(by_source.items()):
            sources[f"{group}/{name}"] = {"n": len(values)}
        if group not in targets:
            continue  # measured only
        budget = targets[group]
        constraints[group] = _at(pooled, budget)
        groups[group].update(target_fpr=budget, threshold=round(constraints[group], 4))
        for name, values in sorted(by_source.items()):
            if len(values) >= SOURCE_MIN_ROWS:
                key = f"{group}/{name}"
                constraints[key] = _at(values, SOURCE_FACTOR * budget)
                sources[key].update(
                    target_fpr=SOURCE_FACTOR * budget, threshold=round(constraints[key], 4)
                )
    if constraints:
        binding = max(constraints, key=lambda k: constraints[k])
        threshold = constraints[binding] + margin
    else:
        binding, threshold = "", margin
    for group, by_source in benign.items():
        pooled = np.asarray([x for values in by_source.values() for x in values])
        groups[group]["fpr"] = round(float((pooled >= threshold).mean()), 4)
        for name, values in by_source.items():
            flagged = float((np.asarray(values) >= threshold).mean())
            sources[f"{group}/{name}"]["fpr"] = round(flagged, 4)
    report = {
        "rule": f"every group within its budget, every source of >= {SOURCE_MIN_ROWS} rows "
        f"within {SOURCE_FACTOR:g}x its group's, + margin {margin:g}",
        "threshold": round(threshold, 4),
        "set_by": binding,
        "groups": groups,
        "sources": sources,
    }
    return threshold, report


def choose_thresholds(
    guard: Any, data: GuardData, args: argparse.Namespace
) -> tuple[dict[str, float], dict[str, Any]]:
    """Per head, the lowest threshold meeting the rule above on the held-out part."""
    prompts = [e for e in data.held if e.document < 0]
    scores = guard.logits([e.text for e in prompts])  # the heads alone: no embedding branch
    thresholds: dict[str, float] = {}
    report: dict[str, Any] = {}
    for name, column in (("injection", 0), ("unsafe", 1)):
        attr = "injection" if name == "injection" else "unsafe"
        labelled = [(i, e) for i, e in enumerate(prompts) if getattr(e, attr) >= 0]
        benign: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        positives: dict[str, list[float]] = defaultdict(list)
        for i, e in labelled:
            if getattr(e, attr) == 0:
                benign[e.group][origin(e.source)].append(float(scores[i, column]))
            else:
                positives[e.source].append(float(scores[i, column]))
        threshold, report[name] = prompt_threshold(benign, TARGETS[name], args.margin)
        report[name]["held_out_tpr"] = {
            s: {"n": len(v), "tpr": round(float((np.asarray(v) >= threshold).mean()), 4)}
            for s, v in sorted(positives.items())
        }
        thresholds[name] = threshold

    # Documents: whole held-out passages, each as its worst window, per domain.
    domains: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for domain, text, planted in data.held_passages:
        domains[domain].append((text, planted))
    flat = [(d, t, p) for d, items in sorted(domains.items()) for t, p in items]
    passage_scores = guard.document_scores([t for _, t, _ in flat])
    threshold = -math.inf
    per_domain: dict[str, Any] = {}
    for domain in sorted(domains):
        rows = [i for i, (d, _, p) in enumerate(flat) if d == domain and p == 0]
        v = passage_scores[rows]
        t = threshold_at_fpr(v, np.zeros(len(v), dtype=np.int8), args.document_fpr)
        per_domain[domain] = {"benign": len(v), "threshold": round(t, 4)}
        threshold = max(threshold, t)
    threshold += args.margin
    for domain in sorted(domains):
        benign = passage_scores[[i for i, (d, _, p) in enumerate(flat) if d == domain and p == 0]]
        planted = passage_scores[[i for i, (d, _, p) in enumerate(flat) if d == domain and p == 1]]
        per_domain[domain]["dropped"] = round(float((benign >= threshold).mean()), 4)
        if len(planted):
            per_domain[domain]["planted"] = len(planted)
            per_domain[domain]["caught"] = round(float((planted >= threshold).mean()), 4)
    thresholds["document"] = threshold
    report["document"] = {
        "threshold": round(threshold, 4),
        "target_fpr": args.document_fpr,
        "domains": per_domain,
    }
    return thresholds, report
