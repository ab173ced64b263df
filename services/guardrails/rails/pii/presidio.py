"""Sensitive data, found: Presidio's pattern recognizers (email, phone, credit card, IBAN, SSN, IP,
...) on a blank spaCy pipeline, so no NER model is needed and nothing is downloaded. Person
names need an NER model, which no package here ships; they are not detected.

tldextract (Presidio's email and URL checks) would fetch the public-suffix list on first use;
it is given an extractor that reads only its bundled snapshot.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

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


def pattern_analyzer(extended: bool = True) -> Any:
    """Presidio's AnalyzerEngine with every predefined English pattern recognizer and a blank
    spaCy pipeline for tokens; `extended` adds ragrail's broader card and phone patterns."""
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
    if extended:
        for recognizer in extra_recognizers():
            registry.add_recognizer(recognizer)
    return AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=["en"])


# Presidio's card pattern knows the classic prefixes (4, 51-55, 34/37, 6011, ...) at 13 to 16
# digits; cards it misses (19-digit Visa, 2-series Mastercard, 12-digit Maestro, 15-digit
# JCB) are any 12 to 19 digits, grouped or not, that pass the Luhn check it applies anyway.
ANY_CARD = r"\b(?:\d[ -]?){11,18}\d\b"
# Presidio's phone recognizer validates with `phonenumbers` for a few regions; numbers
# written in other countries' formats ("(37) 788-063", "699 956 915", "60-56-85-91") pass
# no region. This pattern takes 7 to 15 digits in groups with separators, optionally a +
# country code, parentheses and an extension; scored low (see LOOSE_PHONE_SCORE).
PHONE_LIKE = (
    r"(?<![\w+.-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]\d{2,6}){1,4}"
    r"(?:\s?(?:x|ext\.?)\s?\d{1,5})?(?![\w-])"
)
LOOSE_PHONE_SCORE = 0.35
# Shapes PHONE_LIKE also matches that are something else: dates (also followed by a time),
# US SSNs, IPv4 addresses.
NOT_A_PHONE = re.compile(
    r"^(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4})(?:\s|$)|"
    r"^(?:\d{3}-\d{2}-\d{4}|\d{1,3}(?:\.\d{1,3}){3})$"
)
# Two short digit groups ("467 3395") are as often part of an address or a reference; they
# count as a phone number only after one of these words (within SHORT_CONTEXT_CHARS).
PHONE_WORDS = re.compile(r"phone|call|\btel|mobile|cell|fax|contact|number|reach|dial|answer")
SHORT_CONTEXT_CHARS = 40


def extra_recognizers() -> list[Any]:
    from presidio_analyzer import Pattern, PatternRecognizer
    from presidio_analyzer.predefined_recognizers import CreditCardRecognizer

    class LoosePhoneRecognizer(PatternRecognizer):
        def validate_result(self, pattern_text: str) -> bool | None:
            digits = sum(c.isdigit() for c in re.split(r"x|ext", pattern_text)[0])
            if not 7 <= digits <= 15 or NOT_A_PHONE.match(pattern_text.strip()):
                return False
            return None  # keep the pattern's score

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None,
                    regex_flags: int | None = None) -> list[Any]:  # fmt: skip
            results = super().analyze(text, entities, nlp_artifacts, regex_flags)
            kept = []
            for r in results:
                found = text[r.start : r.end]
                short = len(re.findall(r"\d+", found)) <= 2 and sum(c.isdigit() for c in found) <= 8
                before = text[max(0, r.start - SHORT_CONTEXT_CHARS) : r.start].lower()
                if not short or PHONE_WORDS.search(before):
                    kept.append(r)
            return kept

    return [
        CreditCardRecognizer(
            patterns=[Pattern("card, any issuer (Luhn-checked)", ANY_CARD, 0.3)],
            name="AnyIssuerCreditCardRecognizer",
        ),
        LoosePhoneRecognizer(
            supported_entity="PHONE_NUMBER",
            name="LoosePhoneRecognizer",
            patterns=[Pattern("phone-like digit groups", PHONE_LIKE, LOOSE_PHONE_SCORE)],
        ),
    ]


@dataclass
class Finding:
    entity: str
    start: int
    end: int
    score: float


class PiiDetector:
    """Finds entities and masks them as <ENTITY_TYPE> with presidio-anonymizer."""

    def __init__(self, entities: list[str], score_threshold: float, extended: bool = True) -> None:
        from presidio_anonymizer import AnonymizerEngine

        self.analyzer = pattern_analyzer(extended)
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
