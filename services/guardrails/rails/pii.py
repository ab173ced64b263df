"""Sensitive data: Presidio's pattern recognizers (email, phone, credit card, IBAN, SSN, IP,
...) on a blank spaCy pipeline, so no NER model is needed and nothing is downloaded. Person
names need an NER model, which no package here ships; they are not detected.

tldextract (Presidio's email and URL checks) would fetch the public-suffix list on first use;
it is given an extractor that reads only its bundled snapshot.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from services.guardrails.rails import Outcome

log = logging.getLogger(__name__)

DEFAULT_ENTITIES = (
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "CREDIT_CARD",
    "IBAN_CODE",
    "US_SSN",
    "IP_ADDRESS",
)


def offline_tldextract() -> None:
    """Points tldextract's module-level extractor (what `tldextract.extract` calls) at one
    with no suffix-list URLs: it answers from the snapshot in the package."""
    import tldextract.tldextract as tx

    tx.TLD_EXTRACTOR = tx.TLDExtract(suffix_list_urls=(), cache_dir=None)


def pattern_analyzer() -> Any:
    """Presidio's AnalyzerEngine with every predefined English pattern recognizer and a blank
    spaCy pipeline for tokens."""
    import spacy
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    offline_tldextract()

    class BlankSpacyEngine(SpacyNlpEngine):
        """A SpacyNlpEngine that loads spacy.blank instead of a downloaded model."""

        def load(self) -> None:
            self.nlp = {"en": spacy.blank("en")}

    engine = BlankSpacyEngine(models=[{"lang_code": "en", "model_name": "blank"}])
    engine.load()
    registry = RecognizerRegistry()
    registry.load_predefined_recognizers(nlp_engine=engine, languages=["en"])
    # The spaCy NER recognizer finds nothing on a blank pipeline; drop it rather than run it.
    registry.recognizers = [r for r in registry.recognizers if r.name != "SpacyRecognizer"]
    return AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=["en"])


@dataclass
class Finding:
    entity: str
    start: int
    end: int
    score: float


class PiiDetector:
    """Finds entities and masks them as <ENTITY_TYPE> with presidio-anonymizer."""

    def __init__(self, entities: list[str], score_threshold: float) -> None:
        from presidio_anonymizer import AnonymizerEngine

        self.analyzer = pattern_analyzer()
        supported = set(self.analyzer.get_supported_entities("en"))
        unknown = sorted(set(entities) - supported)
        if unknown:
            from shared.errors import FailedPrecondition

            raise FailedPrecondition(
                f"PII entities {unknown} have no recognizer here; known: {sorted(supported)}"
            )
        self.entities = list(entities)
        self.score_threshold = score_threshold
        self.anonymizer = AnonymizerEngine()
        self.find("warm-up: mail a@example.com")  # first call compiles the patterns

    def find(self, text: str) -> list[Any]:
        return list(
            self.analyzer.analyze(
                text,
                language="en",
                entities=self.entities,
                score_threshold=self.score_threshold,
            )
        )

    def mask(self, text: str, results: list[Any]) -> str:
        return str(self.anonymizer.anonymize(text=text, analyzer_results=results).text)


def summary(results: list[Any]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.entity_type] = counts.get(r.entity_type, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))


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
