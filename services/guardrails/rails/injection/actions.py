"""Prompt injection and jailbreaks: the guard model's injection head (shared/models/guard.py,
`python -m trainers.guardrails --all`) on the user's message; or, with only a classifier of
the older single-head recipe (head.json), that classifier on the message and, in windows, on
retrieved chunks, since an instruction hidden in the middle of a long passage would fall
outside the encoder's token window.

The classifier is loaded once for the whole service (Resources.classifier): the default
embedding model is its paired encoder, and its vectors are cached for the topic rail."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.guardrails.rails.base import (
    LoadedRail,
    Outcome,
    Resources,
    chunk_action,
    guarded,
)
from services.guardrails.rails.injection.settings import InjectionSettings
from shared.models.classifier import InjectionClassifier
from shared.text import windows

log = logging.getLogger(__name__)


@dataclass
class InjectionRail:
    classifier: InjectionClassifier
    threshold: float
    # Retrieved passages are not prompts: the classifier scores them higher, so chunks have
    # their own threshold, calibrated on benign documents (trainers/guardrails/calibrate.py).
    chunk_threshold: float

    @staticmethod
    def verdict(score: float, threshold: float, what: str) -> Outcome:
        details = {"score": round(score, 4), "threshold": round(threshold, 4)}
        if score >= threshold:
            return Outcome(
                "block",
                f"{what} (classifier logit {score:.2f} >= {threshold:.2f})",
                details=details,
            )
        return Outcome(details=details)

    def check_vector(self, vector: np.ndarray) -> Outcome:
        score = float(self.classifier.scores(vector[None, :])[0])
        return self.verdict(score, self.threshold, "prompt injection")

    def check(self, text: str) -> Outcome:
        return self.check_vector(self.classifier.embed([text])[0])

    def check_chunks(self, chunks: list[str], window_chars: int) -> list[Outcome]:
        """One outcome per chunk: blocked when any of its windows scores as an injection."""
        pieces = [windows(c, window_chars) for c in chunks]
        flat = [p for ps in pieces for p in ps]
        if not flat:
            return []
        scores = self.classifier.scores(self.classifier.embed(flat))
        outcomes, start = [], 0
        for ps in pieces:
            best = float(scores[start : start + len(ps)].max())
            start += len(ps)
            outcomes.append(
                self.verdict(best, self.chunk_threshold, "instructions hidden in the passage")
            )
        return outcomes


def chunk_threshold(settings: InjectionSettings, classifier: InjectionClassifier) -> float:
    if settings.retrieval_threshold is not None:
        return settings.retrieval_threshold
    calibrated = classifier.head.get("retrieval_threshold")
    if calibrated is not None:
        return float(calibrated)
    log.warning(
        "the injection classifier has no retrieval threshold; chunks are judged at the prompt "
        "threshold, which flags many benign documents. Run `python -m "
        "trainers.guardrails.calibrate --model DIR --docs <corpus.jsonl>`",
        extra={"model": str(classifier.path)},
    )
    return classifier.threshold


def load_guard(settings: InjectionSettings, resources: Resources) -> LoadedRail:
    """With the guard model: its injection head on the message (one cached graph run shared
    with the content-safety and topic rails), and on chunks its document head, which was
    trained on documents (the document_injection rail; `ragrail chunk injection` stays for
    configurations written before it)."""
    from services.guardrails.rails.document_injection.actions import DocumentInjectionRail
    from services.guardrails.rails.guard_heads import guard_of, threshold, verdict

    guard = guard_of(resources, "injection")
    limit = threshold(guard, "injection", settings.threshold)
    column = guard.model.head("injection").logit

    async def ragrail_injection(text: str) -> dict[str, Any]:
        def run() -> Outcome:
            score = float(guard([text]).logits[0, column])
            return verdict(score, limit, "prompt injection or jailbreak")

        return await guarded("injection", settings.on_error, run)

    documents = DocumentInjectionRail(
        guard.model,
        threshold(guard, "document", settings.retrieval_threshold),
        int(guard.model.head("document").config.get("window_chars") or settings.window_chars),
    )
    ragrail_chunk_injection = chunk_action(
        "chunk injection", settings.on_error, documents.check_chunks
    )
    return LoadedRail(
        {
            "ragrail_injection": ragrail_injection,
            "ragrail_chunk_injection": ragrail_chunk_injection,
        },
        info={"injection_threshold": f"{limit:.4f}"},
    )


def load(settings: InjectionSettings, resources: Resources) -> LoadedRail:
    if getattr(resources, "guard", None) is not None:
        return load_guard(settings, resources)
    classifier = resources.classifier
    threshold = classifier.threshold if settings.threshold is None else settings.threshold
    rail = InjectionRail(classifier, threshold, chunk_threshold(settings, classifier))
    vectors = resources.classifier_vectors
    # A later rail (topics) embeds the message with the general encoder: this rail's worker
    # thread does it too, so that rail finds the vector cached and needs no thread of its own.
    ahead = resources.embeds_ahead("ragrail injection")

    async def ragrail_injection(text: str) -> dict[str, Any]:
        def run() -> Outcome:
            outcome = rail.check_vector(vectors([text])[0])
            if ahead and outcome.verdict != "block":
                resources.general_vectors([text])
            return outcome

        return await guarded("injection", settings.on_error, run)

    ragrail_chunk_injection = chunk_action(
        "chunk injection",
        settings.on_error,
        lambda chunks: rail.check_chunks(chunks, settings.window_chars),
    )
    return LoadedRail(
        {
            "ragrail_injection": ragrail_injection,
            "ragrail_chunk_injection": ragrail_chunk_injection,
        },
        info={"injection_threshold": f"{threshold:.4f}"},
    )
