"""Groundedness: is each sentence of an answer supported by the retrieved context?

The context is cut into sentences (long ones into windows of about `window_chars`). For each
answer sentence (a claim), the `candidates` context sentences sharing the most content words
with it are scored, and the claim keeps its best score; scoring only those keeps the check
to a few short texts instead of every passage in full (measured: 5 chunks took 0.8 s with
whole windows on the loaded 2-core CPU). Two scorers:

* `cross-encoder`: a reranker trained by `python -m trainers.reranker` scores (claim,
  sentence) pairs, 0 to 1 (sigmoid);
* `embedding`: cosine similarity of sentence embeddings (the service's embedding model).

A claim scoring below the threshold is unsupported. When the share of supported claims
falls below `min_supported`, the rail blocks the answer or, with action `annotate`, lets it
through with each unsupported sentence marked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.guardrails.rails.base import Outcome
from shared.text import claim_spans, overlap_words

# Sentences this short carry no claim ("Yes.", "In short:") and are not scored.
MIN_CLAIM_CHARS = 12


def candidates(claims: list[str], sentences_: list[str], k: int) -> list[list[int]]:
    """For each claim, the indexes of the k context sentences sharing the most content words
    with it (earlier first on ties)."""
    words = [overlap_words(s) for s in sentences_]
    picked = []
    for claim in claims:
        mine = overlap_words(claim)
        order = sorted(range(len(sentences_)), key=lambda i: (-len(mine & words[i]), i))
        picked.append(order[:k])
    return picked


def context_sentences(text: str) -> list[str]:
    """The claim-length sentences of a context chunk, or the chunk whole when it has none."""
    found = [text[s.start : s.end] for s in claim_spans(text, MIN_CLAIM_CHARS)]
    return found or [text]


def cut(text: str, max_chars: int) -> list[str]:
    """`text` in pieces of at most about max_chars, at spaces (a run-on "sentence" such as a
    table row would otherwise be truncated by the encoder)."""
    if len(text) <= max_chars:
        return [text]
    pieces, current = [], ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > max_chars:
            pieces.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    return [*pieces, current] if current else pieces


class EmbeddingScorer:
    name = "embedding"

    def __init__(self, embed: Callable[[list[str]], np.ndarray]) -> None:
        self.embed = embed

    def support(self, claims: list[str], context: list[str], pick: list[list[int]]) -> np.ndarray:
        used = sorted({i for row in pick for i in row})
        vectors = np.asarray(self.embed(claims + [context[i] for i in used]), dtype=np.float32)
        vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        c, w = vectors[: len(claims)], vectors[len(claims) :]
        where = {i: n for n, i in enumerate(used)}
        return np.array(
            [max(float(c[j] @ w[where[i]]) for i in row) for j, row in enumerate(pick)],
            dtype=np.float32,
        )


class CrossEncoderScorer:
    name = "cross-encoder"

    def __init__(self, model: Any, model_name: str) -> None:
        self.model = model  # services/reranker's OnnxCrossEncoder: predict(pairs) -> scores
        self.model_name = model_name

    def support(self, claims: list[str], context: list[str], pick: list[list[int]]) -> np.ndarray:
        pairs = [(claims[j], context[i]) for j, row in enumerate(pick) for i in row]
        scores = np.asarray(self.model.predict(pairs), dtype=np.float32)
        out, start = [], 0
        for row in pick:
            out.append(float(scores[start : start + len(row)].max()))
            start += len(row)
        return np.array(out, dtype=np.float32)


@dataclass
class GroundingRail:
    scorer: Any
    threshold: float
    min_supported: float = 1.0
    # "block" refuses an unsupported answer; "annotate" marks its unsupported sentences.
    action: str = "block"
    window_chars: int = 300
    candidates: int = 4
    marker: str = " [not supported by the sources]"

    def support(self, claims: list[str], pieces: list[str]) -> np.ndarray:
        """Each claim's best score. The lexically closest sentence is scored first; only the
        claims it does not support are scored against their other candidates, so a grounded
        answer costs one short text per sentence."""
        pick = candidates(claims, pieces, self.candidates)
        best = self.scorer.support(claims, pieces, [row[:1] for row in pick])
        rest = [j for j, row in enumerate(pick) if best[j] < self.threshold and len(row) > 1]
        if rest:
            more = self.scorer.support(
                [claims[j] for j in rest], pieces, [pick[j][1:] for j in rest]
            )
            for j, score in zip(rest, more, strict=True):
                best[j] = max(best[j], score)
        return best

    def check(self, answer: str, context: list[str]) -> Outcome:
        spans = claim_spans(answer, MIN_CLAIM_CHARS)
        if not spans:
            return Outcome(details={"sentences": 0})
        if not context:
            # No knowledge base was used (or every chunk was dropped, which the retrieval
            # rails already report): there is nothing to check the answer against, and a
            # greeting or a general question must not be refused for it. Fail soft.
            return Outcome(
                reason="not checked: no context to ground the answer on",
                details={"sentences": len(spans), "grounded": "no context"},
            )
        pieces = [
            piece
            for chunk in context
            for sentence in context_sentences(chunk)
            for piece in cut(sentence, self.window_chars)
        ]
        claims = [answer[s.start : s.end] for s in spans]
        support = self.support(claims, pieces)
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
            end = spans[i].end
            annotated = annotated[:end] + self.marker + annotated[end:]
        return Outcome("modify", reason, annotated, details=details)
