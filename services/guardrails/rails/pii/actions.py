"""Sensitive data: masks (or blocks) what the Presidio detector (presidio.py) finds in the
user's message, the answer and each retrieved chunk. One detector serves all three."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.guardrails.rails.base import LoadedRail, Outcome, Resources, chunk_action, guarded
from services.guardrails.rails.pii.presidio import PiiDetector, summary
from services.guardrails.rails.pii.settings import PiiSettings


@dataclass
class PiiRail:
    detector: PiiDetector
    # "mask" replaces each finding with <ENTITY_TYPE>; "block" refuses the text.
    action: str = "mask"

    def check(self, text: str) -> Outcome:
        results = self.detector.find(text)
        if not results:
            return Outcome()
        found = summary(results)
        spans = [
            {"entity": r.entity_type, "start": r.start, "end": r.end, "score": round(r.score, 2)}
            for r in results
        ]
        if self.action == "block":
            return Outcome("block", f"sensitive data: {found}", details={"spans": spans})
        masked = self.detector.mask(text, results)
        return Outcome("modify", f"masked {found}", masked, details={"spans": spans})


def load(settings: PiiSettings, resources: Resources) -> LoadedRail:
    detector = PiiDetector(
        settings.entities, settings.score_threshold, settings.extended_recognizers
    )
    rails = {
        "input": PiiRail(detector, settings.input_action),
        "output": PiiRail(detector, settings.output_action),
    }
    retrieval = PiiRail(detector, "block" if settings.retrieval_action == "drop" else "mask")

    async def ragrail_pii(text: str, source: str = "input") -> dict[str, Any]:
        rail = rails["output" if source == "output" else "input"]
        return await guarded(f"pii {source}", settings.on_error, lambda: rail.check(text))

    ragrail_chunk_pii = chunk_action(
        "chunk pii", settings.on_error, lambda chunks: [retrieval.check(c) for c in chunks]
    )
    return LoadedRail(
        {"ragrail_pii": ragrail_pii, "ragrail_chunk_pii": ragrail_chunk_pii},
        info={"pii_entities": ",".join(settings.entities)},
    )
