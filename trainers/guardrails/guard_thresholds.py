"""Each guard head's threshold, chosen with the served INT8 graph on the held-out part of
the data (step 5 of trainers/guardrails/guard.py's recipe): prompts per group of benign
text, documents per domain as whole passages (their worst window)."""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from typing import Any

import numpy as np

from trainers.guardrails.guard_data import GuardData
from trainers.guardrails.scoring import threshold_at_fpr

# False-positive targets per group of held-out benign text, per head. `sensitive` is the
# ordinary requests that contain words such as kill or bomb, and benign security requests
# that sound malicious; `lookalikes` benign requests about passwords, roles, instructions.
TARGETS: dict[str, dict[str, float]] = {
    "injection": {"instructions": 0.005, "questions": 0.005, "chitchat": 0.0, "in_domain": 0.005},
    "unsafe": {
        "instructions": 0.005,
        "questions": 0.005,
        "chitchat": 0.0,
        "in_domain": 0.005,
        "sensitive": 0.02,
    },
}
# Groups measured on held-out data but not held to a target: benign requests built to look
# like injections (passwords, roles, "instructions"), deepset's benign prompts. Holding the
# threshold to a few dozen deliberately hard rows set it by one or two of them (measured:
# unsafe recall 0.58 at the threshold they gave against 0.8 without).
DOCUMENT_FPR = 0.01


def choose_thresholds(
    guard: Any, data: GuardData, args: argparse.Namespace
) -> tuple[dict[str, float], dict[str, Any]]:
    """Per head, the lowest threshold keeping every held-out benign group within its target."""
    prompts = [e for e in data.held if e.document < 0]
    scores = guard.score([e.text for e in prompts]).logits
    thresholds: dict[str, float] = {}
    report: dict[str, Any] = {}
    for name, column in (("injection", 0), ("unsafe", 1)):
        attr = "injection" if name == "injection" else "unsafe"
        labelled = [(i, e) for i, e in enumerate(prompts) if getattr(e, attr) >= 0]
        groups: dict[str, list[float]] = defaultdict(list)
        positives: dict[str, list[float]] = defaultdict(list)
        for i, e in labelled:
            if getattr(e, attr) == 0:
                groups[e.group].append(float(scores[i, column]))
            else:
                positives[e.source].append(float(scores[i, column]))
        per_group = {}
        threshold = -math.inf
        for group, values in sorted(groups.items()):
            per_group[group] = {"n": len(values)}
            if group not in TARGETS[name]:
                continue  # measured only
            target = TARGETS[name][group]
            v = np.asarray(values, dtype=np.float32)
            t = threshold_at_fpr(v, np.zeros(len(v), dtype=np.int8), target)
            per_group[group].update(target_fpr=target, threshold=round(t, 4))
            threshold = max(threshold, t)
        threshold = (threshold if math.isfinite(threshold) else 0.0) + args.margin
        for group, values in groups.items():
            v = np.asarray(values)
            per_group[group]["fpr"] = round(float((v >= threshold).mean()), 4)
        report[name] = {
            "threshold": round(threshold, 4),
            "groups": per_group,
            "held_out_tpr": {
                s: {"n": len(v), "tpr": round(float((np.asarray(v) >= threshold).mean()), 4)}
                for s, v in sorted(positives.items())
            },
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
