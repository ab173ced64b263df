"""A linear head on sentence embeddings: logistic regression (or a small MLP, for comparison)
fitted on frozen vectors, with out-of-fold scores for choosing its threshold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.guardrails.scoring import roc_auc, stratified_folds

# Inverse regularisation strengths tried by cross-validation on the training split.
C_GRID = (0.25, 1.0, 4.0, 16.0, 64.0)


@dataclass
class LinearHead:
    """score = vector . weights + bias (a logit); the service applies the same numbers."""

    weights: np.ndarray  # float32 (dimension,)
    bias: float

    def scores(self, vectors: np.ndarray) -> np.ndarray:
        return (vectors @ self.weights + self.bias).astype(np.float32)


def _fit_logreg(vectors: np.ndarray, labels: np.ndarray, c: float, seed: int) -> LinearHead:
    from sklearn.linear_model import LogisticRegression

    # Balanced weights: the data is 37% injections, and the threshold is set afterwards anyway;
    # lbfgs is deterministic for a given input.
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=5000, random_state=seed)
    model.fit(vectors, labels)
    return LinearHead(model.coef_[0].astype(np.float32), float(model.intercept_[0]))


def _fit_mlp(vectors: np.ndarray, labels: np.ndarray, c: float, seed: int) -> Any:
    from sklearn.neural_network import MLPClassifier

    model = MLPClassifier(
        hidden_layer_sizes=(256,), alpha=1.0 / c, max_iter=2000, random_state=seed
    )
    model.fit(vectors, labels)
    return model


def out_of_fold(
    vectors: np.ndarray,
    labels: np.ndarray,
    kind: str,
    c: float,
    folds: int,
    seed: int,
    strata: np.ndarray | None = None,
) -> np.ndarray:
    """Each training row scored by a head fitted on the other folds (folds stratified by
    `strata`, the labels by default)."""
    scores = np.empty(len(labels), dtype=np.float32)
    for held in stratified_folds(labels if strata is None else strata, folds, seed):
        rest = np.setdiff1d(np.arange(len(labels)), held)
        if kind == "logreg":
            scores[held] = _fit_logreg(vectors[rest], labels[rest], c, seed).scores(vectors[held])
        else:
            model = _fit_mlp(vectors[rest], labels[rest], c, seed)
            probability = np.clip(model.predict_proba(vectors[held])[:, 1], 1e-7, 1 - 1e-7)
            scores[held] = np.log(probability / (1 - probability))
    return scores


def choose_c(
    vectors: np.ndarray,
    labels: np.ndarray,
    kind: str,
    folds: int,
    seed: int,
    strata: np.ndarray | None = None,
) -> tuple[float, np.ndarray, list[dict]]:
    """The grid value with the best out-of-fold ROC AUC, its out-of-fold scores, and the
    whole grid's results."""
    grid: list[dict] = []
    best: tuple[float, float, np.ndarray] | None = None
    for c in C_GRID:
        scores = out_of_fold(vectors, labels, kind, c, folds, seed, strata)
        auc = roc_auc(scores, labels)
        grid.append({"C": c, "oof_auc": auc})
        if best is None or auc > best[0]:
            best = (auc, c, scores)
    assert best is not None
    return best[1], best[2], grid


def fit_logreg(vectors: np.ndarray, labels: np.ndarray, c: float, seed: int) -> LinearHead:
    return _fit_logreg(vectors, labels, c, seed)
