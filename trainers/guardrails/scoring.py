"""Labelled texts, operating points and the threshold rule; numpy only, no model.

A classifier here gives each text a score (higher: more likely an injection). Its threshold
is chosen on training data only (out-of-fold or held-out scores), as the lowest score at
which the share of benign texts flagged stays at or below a target false-positive rate; the
test split only ever measures that choice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Labelled:
    texts: list[str]
    labels: np.ndarray  # int8, 1 = injection

    @classmethod
    def load(cls, path: Path) -> Labelled:
        """JSON lines with `text` and `label` (1 = injection, 0 = benign)."""
        if not path.is_file():
            raise SystemExit(f"{path} does not exist; expected JSON lines with text and label")
        texts: list[str] = []
        labels: list[int] = []
        with path.open(encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                label = int(row["label"])
                if label not in (0, 1):
                    raise SystemExit(f"{path}:{number}: label {label}; expected 0 or 1")
                texts.append(str(row["text"]))
                labels.append(label)
        data = cls(texts, np.asarray(labels, dtype=np.int8))
        if len(set(labels)) < 2:
            raise SystemExit(f"{path}: needs both benign (0) and injection (1) rows")
        return data

    def subset(self, rows: np.ndarray) -> Labelled:
        return Labelled([self.texts[i] for i in rows], self.labels[rows])

    @property
    def positives(self) -> int:
        return int(self.labels.sum())


def sha256(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def stratified_folds(labels: np.ndarray, k: int, seed: int) -> list[np.ndarray]:
    """k disjoint row sets covering every row, each with about the same share of each label
    (any small integers: 0/1, or strata such as the source of a benign text)."""
    rng = np.random.default_rng(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    for label in np.unique(labels).tolist():
        rows = np.flatnonzero(labels == label)
        rng.shuffle(rows)
        for i, row in enumerate(rows):
            folds[i % k].append(int(row))
    return [np.asarray(sorted(f), dtype=np.int64) for f in folds]


def threshold_at_fpr(scores: np.ndarray, labels: np.ndarray, target_fpr: float) -> float:
    """The lowest threshold (flag when score >= threshold) whose false-positive rate on these
    scores is at most `target_fpr`: midway between the benign score that would be one false
    positive too many and the next score above it, so no single example sits on the edge."""
    negatives = np.sort(scores[labels == 0])[::-1]
    allowed = int(np.floor(target_fpr * len(negatives) + 1e-9))
    if allowed >= len(negatives):
        return float(negatives[-1])
    edge = negatives[allowed]
    above = scores[scores > edge]
    if not len(above):
        return float(np.nextafter(edge, np.inf))
    return float(np.nextafter((edge + above.min()) / 2, np.inf))


def operating_point(scores: np.ndarray, labels: np.ndarray, threshold: float) -> dict:
    flagged = scores >= threshold
    pos, neg = labels == 1, labels == 0
    tp, fp = int((flagged & pos).sum()), int((flagged & neg).sum())
    return {
        "threshold": round(float(threshold), 6),
        "tpr": round(tp / max(int(pos.sum()), 1), 4),
        "fpr": round(fp / max(int(neg.sum()), 1), 4),
        "true_positives": tp,
        "false_positives": fp,
        "positives": int(pos.sum()),
        "negatives": int(neg.sum()),
        "accuracy": round(float((flagged == pos).mean()), 4),
    }


def best_tpr_at_fpr(scores: np.ndarray, labels: np.ndarray, max_fpr: float) -> dict:
    """The best operating point with FPR <= max_fpr if the threshold were picked on these
    very scores: an upper bound for reference, never a threshold to ship."""
    return operating_point(scores, labels, threshold_at_fpr(scores, labels, max_fpr))


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a random positive outscores a random negative (ties count half)."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return round(float((greater + 0.5 * ties) / (len(pos) * len(neg))), 4)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))
