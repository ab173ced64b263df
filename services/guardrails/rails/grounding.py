"""Groundedness: is each sentence of an answer supported by the retrieved context?

Each answer sentence is scored against every context window (a chunk cut into pieces that fit
the scorer's token window) and keeps its best score. Two scorers:

* `cross-encoder`: a reranker trained by `python -m trainers.reranker` scores (sentence,
  window) pairs, 0 to 1 (sigmoid);
* `embedding`: cosine similarity of sentence embeddings (the service's embedding model).

A sentence scoring below the threshold is unsupported. When the share of supported sentences
falls below `min_supported`, the rail blocks the answer or, with action `annotate`, lets it
through with each unsupported sentence marked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.guardrails.rails import Outcome
from services.guardrails.rails.injection import windows

# A sentence ends at . ! or ? followed by whitespace (so "example.com" or "3.5" do not end
# one), at a line break, or at the end.
SENTENCE = re.compile(r"[^\n]+?(?:[.!?]+(?=\s|$)|(?=\n)|$)")
# Sentences this short carry no claim ("Yes.", "In short:") and are not scored.
MIN_CLAIM_CHARS = 12


def sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text` that is long enough to make a claim."""
    spans = []
    for match in SENTENCE.finditer(text):
        piece = match.group(0)
        stripped = piece.strip()
        if len(stripped) >= MIN_CLAIM_CHARS:
            start = match.start() + piece.index(stripped[0])
            spans.append((start, start + len(stripped)))
    return spans


class EmbeddingScorer:
    name = "embedding"

    def __init__(self, embed: Callable[[list[str]], np.ndarray]) -> None:
        self.embed = embed

    def support(self, claims: list[str], context: list[str]) -> np.ndarray:
        vectors = np.asarray(self.embed(claims + context), dtype=np.float32)
        vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        c, w = vectors[: len(claims)], vectors[len(claims) :]
        return (c @ w.T).max(axis=1)


class CrossEncoderScorer:
    name = "cross-encoder"

    def __init__(self, model: Any, model_name: str) -> None:
        self.model = model  # services/reranker's OnnxCrossEncoder: predict(pairs) -> scores
        self.model_name = model_name

    def support(self, claims: list[str], context: list[str]) -> np.ndarray:
        pairs = [(c, w) for c in claims for w in context]
        scores = np.asarray(self.model.predict(pairs), dtype=np.float32)
        return scores.reshape(len(claims), len(context)).max(axis=1)


@dataclass
class GroundingRail:
    scorer: Any
    threshold: float
    min_supported: float = 1.0
    # "block" refuses an unsupported answer; "annotate" marks its unsupported sentences.
    action: str = "block"
    window_chars: int = 500
    marker: str = " [not supported by the sources]"

    def check(self, answer: str, context: list[str]) -> Outcome:
        spans = sentences(answer)
        if not spans:
            return Outcome(details={"sentences": 0})
        if not context:
            return Outcome(
                "block" if self.action == "block" else "modify",
                "no context to ground the answer on",
                None if self.action == "block" else answer + self.marker,
                details={"sentences": len(spans), "supported": 0},
            )
        pieces = [w for chunk in context for w in windows(chunk, self.window_chars)]
        claims = [answer[s:e] for s, e in spans]
        support = self.scorer.support(claims, pieces)
        unsupported = [i for i, score in enumerate(support) if score < self.threshold]
        share = 1 - len(unsupported) / len(spans)
        details = {
            "scorer": self.scorer.name,
            "sentences": len(spans),
            "supported": len(spans) - len(unsupported),
            "support": [round(float(s), 4) for s in support],
            "threshold": self.threshold,
        }
        if share >= self.min_supported:
            return Outcome(details=details)
        worst = int(np.argmin(support))
        reason = (
            f"{len(unsupported)} of {len(spans)} sentence(s) not supported by the context "
            f"({self.scorer.name} score {float(support[worst]):.2f} < {self.threshold} for "
            f"'{claims[worst][:80]}')"
        )
        if self.action == "block":
            return Outcome("block", reason, details=details)
        annotated = answer
        for i in reversed(unsupported):
            end = spans[i][1]
            annotated = annotated[:end] + self.marker + annotated[end:]
        return Outcome("modify", reason, annotated, details=details)
