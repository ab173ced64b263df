"""The prompt heads' threshold rule (trainers/guardrails/guard_thresholds.py), on made-up
held-out scores: numpy only, no model."""

from __future__ import annotations

import numpy as np
import pytest

from trainers.guardrails.guard_thresholds import (
    SOURCE_FACTOR,
    origin,
    prompt_threshold,
)

TARGETS = {"chitchat": 0.005, "instructions": 0.005}


def scores(n: int, seed: int, loc: float = 0.0) -> list[float]:
    return np.random.default_rng(seed).normal(loc, 1.0, n).tolist()


def test_one_outlier_no_longer_sets_the_threshold() -> None:
    chitchat = [*scores(320, 0), 9.0]  # one odd row far above the rest
    benign = {"chitchat": {"clinc150_chitchat": chitchat}}
    threshold, report = prompt_threshold(benign, TARGETS)
    assert threshold < 9.0  # the old rule (no false positive) gave 9.0 and above
    assert threshold > sorted(chitchat)[-3]  # but the budget is 1 row of 321, not more
    assert report["groups"]["chitchat"]["fpr"] <= 0.005
    assert report["set_by"] == "chitchat/clinc150_chitchat" or report["set_by"] == "chitchat"


def test_a_large_source_cannot_hide_behind_its_group() -> None:
    big = scores(3000, 1)
    odd = scores(200, 2, loc=1.5)  # one public source scoring higher than the others
    benign = {"instructions": {"clinc150": big, "self_instruct": odd}}
    threshold, report = prompt_threshold(benign, TARGETS)
    pooled_only = np.sort(big + odd)[::-1][int(0.005 * 3200)]
    assert threshold > pooled_only
    assert report["set_by"] == "instructions/self_instruct"
    row = report["sources"]["instructions/self_instruct"]
    assert row["fpr"] <= SOURCE_FACTOR * 0.005 == row["target_fpr"]
    assert report["groups"]["instructions"]["fpr"] <= 0.005


def test_small_sources_count_in_their_group_only_and_unbudgeted_groups_are_measured() -> None:
    benign = {
        "instructions": {"clinc150": scores(400, 3), "garak": [5.0] * 2},
        "lookalikes": {"clinc150_injection_lookalike": [50.0] * 30},
    }
    threshold, report = prompt_threshold(benign, TARGETS, margin=0.25)
    # 2 rows of 402 are within the group's budget: the two odd rows do not set it alone.
    assert threshold < 5.0
    assert report["groups"]["instructions"]["fpr"] <= 0.005
    garak = report["sources"]["instructions/garak"]
    assert garak["fpr"] == 1.0 and "target_fpr" not in garak
    assert report["groups"]["lookalikes"]["fpr"] == 1.0 and report["set_by"] != "lookalikes"
    unmargined, _ = prompt_threshold(benign, TARGETS)
    assert threshold == pytest.approx(unmargined + 0.25)


def test_origin_merges_a_source_across_sets() -> None:
    assert origin("benign_instructions/clinc150") == origin("content_safety/clinc150")


class PassageScores:
    """A guard whose passages score as given (by text), and which has no prompt rows."""

    def __init__(self, by_text: dict[str, float]) -> None:
        self.by_text = by_text

    def logits(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), 3), dtype=np.float32)

    def document_scores(self, texts: list[str]) -> np.ndarray:
        return np.asarray([self.by_text[t] for t in texts], dtype=np.float32)


def test_two_passages_of_one_domain_no_longer_set_the_document_threshold() -> None:
    import argparse

    from trainers.guardrails.guard_data import GuardData
    from trainers.guardrails.guard_thresholds import choose_thresholds

    by_text: dict[str, float] = {}
    data = GuardData()
    for k, domain in enumerate(("email", "howto", "news", "web")):
        values = scores(150, k)
        if domain == "howto":
            values[:2] = [8.0, 8.1]  # two odd passages far above every other
        for j, value in enumerate(values):
            text = f"{domain} {j}"
            by_text[text] = value
            data.held_passages.append((domain, text, 0))
        planted = f"{domain} planted"
        by_text[planted] = 6.0
        data.held_passages.append((domain, planted, 1))
    args = argparse.Namespace(margin=0.0, document_fpr=0.01)
    thresholds, report = choose_thresholds(PassageScores(by_text), data, args)
    threshold = thresholds["document"]
    # The old rule (1 % of each domain) took the how-to domain's second-highest passage: 8.0.
    assert report["document"]["domains"]["howto"]["threshold"] >= 8.0
    assert threshold < 8.0 and report["document"]["domains"]["howto"]["caught"] == 1.0
    # Within the budgets: 1 % of all 600 passages, 2 % of every domain.
    assert all(d["dropped"] <= 2 * 0.01 for d in report["document"]["domains"].values())
    pooled = np.asarray([v for t, v in by_text.items() if "planted" not in t])
    assert (pooled >= threshold).mean() <= 0.01
    assert report["document"]["set_by"].startswith("documents")
