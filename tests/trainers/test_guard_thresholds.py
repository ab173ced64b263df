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
