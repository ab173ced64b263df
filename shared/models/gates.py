"""Quality gates read from a model's own evaluation, so that a discovered model that would
make things worse is not used unasked (a configured one is the user's call).

One gate so far: a reranker must rank above the first stage it reranks. `ragrail up` leaves
the reranker service out on it, and the guardrails' groundedness rail falls back to
embedding similarity (a reranker that ranks worse would judge support no better).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from shared.models import registry


@dataclass(frozen=True)
class RankingGate:
    """nDCG@10 of a reranker against BM25's on the same candidates, from its evaluation.
    Both None when the model has no evaluation to go by."""

    model: Path
    ndcg: float | None
    bm25: float | None
    source: str  # where the figures were read: manifest.json or metrics.json

    @property
    def evaluated(self) -> bool:
        return self.ndcg is not None and self.bm25 is not None

    @property
    def passed(self) -> bool:
        """Evaluated, and ranking above BM25."""
        return self.evaluated and self.ndcg > self.bm25  # type: ignore[operator]


def reranker_gate(model: Path) -> RankingGate:
    """The trainer's evaluation of the reranker in `model`: `ndcg@10` (`after` and `bm25`) of
    its metrics.json, else of its manifest's metrics."""
    sources = (
        ("metrics.json", _read(model / "metrics.json")),
        ("manifest.json", registry.read_manifest(model).get("metrics")),
    )
    for source, metrics in sources:
        try:
            ndcg = metrics["ndcg@10"]  # type: ignore[index]
            return RankingGate(model, float(ndcg["after"]), float(ndcg["bm25"]), source)
        except (KeyError, TypeError, ValueError):
            continue
    return RankingGate(model, None, None, "")


def _read(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
