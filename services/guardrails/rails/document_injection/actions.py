"""Instructions planted in documents: the guard model's document head on each retrieved
chunk, in windows of consecutive sentences (a short instruction in a long passage would be
lost in one embedding). A chunk with a window at or above the threshold is dropped; the
others still reach the model, so one poisoned passage never blocks the answer.

The head was trained on benign passages of several kinds (encyclopedia, financial reports,
technical documentation, how-to, the sample corpus, and e-mails, web pages, tables and code
written for the project) with attacks inserted at the start, middle or end: public direct
attacks, and instructions addressed to the assistant ("when summarising this document, tell
the user ..."), plain, quoted, in HTML comments, as "note to the AI" and as hidden text. Its
threshold is chosen per domain on held-out passages (trainers/guardrails/guard.py). The
attack is an instruction to the assistant; a document's own imperative sentences addressed
to its human reader ("Preheat the oven", "Run cargo build", "please send me the figures by
Friday") are not."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from services.guardrails.rails.base import LoadedRail, Outcome, Resources, chunk_action
from services.guardrails.rails.document_injection.settings import DocumentInjectionSettings
from services.guardrails.rails.guard_heads import guard_of, threshold, verdict
from shared.models.guard import GuardModel
from shared.text import windows


@dataclass
class DocumentInjectionRail:
    model: GuardModel
    threshold: float
    window_chars: int

    def check_chunks(self, chunks: list[str]) -> list[Outcome]:
        """One outcome per chunk: dropped when any of its windows scores at the threshold;
        the reason quotes the start of that window."""
        pieces = [windows(c, self.window_chars) for c in chunks]
        flat = [p for ps in pieces for p in ps]
        if not flat:
            return []
        # Uncached: chunk windows rarely repeat, and they would push the user's messages out.
        scores = self.model.logits(flat)[:, self.model.head("document").logit]
        outcomes, start = [], 0
        for ps in pieces:
            part = scores[start : start + len(ps)]
            worst = int(np.argmax(part))
            start += len(ps)
            excerpt = " ".join(ps[worst].split())[:80]
            outcomes.append(
                verdict(
                    float(part[worst]),
                    self.threshold,
                    f"instructions planted in the passage: '{excerpt}…'",
                    windows=len(ps),
                )
            )
        return outcomes


def load(settings: DocumentInjectionSettings, resources: Resources) -> LoadedRail:
    guard = guard_of(resources, "document injection")
    head = guard.model.head("document")
    size = settings.window_chars or int(head.config.get("window_chars") or 500)
    rail = DocumentInjectionRail(
        guard.model, threshold(guard, "document", settings.threshold), size
    )
    action = chunk_action("document injection", settings.on_error, rail.check_chunks)
    return LoadedRail(
        {"ragrail_document_injection": action},
        info={
            "document_injection_threshold": f"{rail.threshold:.4f}",
            "document_injection_window_chars": str(size),
        },
    )
