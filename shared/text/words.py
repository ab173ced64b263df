"""Word-level measures of text, shared by the gateway's grounding and the benches that replay
it: the content words of a text, and the share of a claim's content words that a source
holds (`support`). The gateway uses it to check a generated sentence against the sources, to
attribute it, and to weigh how much a sentence bears on a question."""

from __future__ import annotations

import re

WORD = re.compile(r"[a-z0-9]+(?:[.,'-][a-z0-9]+)*")
# Words that carry no claim of their own: an answer sentence is judged by the rest.
STOPWORDS = frozenset(
    re.findall(
        r"\S+",
        "a an the and or but if then than of to in on at by for with from as into onto about "
        "over under between through during before after above below up down out off again "
        "is are was were be been being am do does did doing have has had having can could "
        "will would shall should may might must it its it's this that these those there here "
        "they them their theirs he him his she her hers we us our ours you your yours i me my "
        "which who whom whose what when where why how all any both each few more most other "
        "some such no nor not only own same so too very just also s t one ones per via "
        "according source sources document documents say says said based answer text",
    )
)


def content_words(text: str) -> list[str]:
    return [w for w in WORD.findall(text.lower()) if w not in STOPWORDS]


def support(claim: str, source: str) -> float:
    """Share of the claim's content words that the source holds (numbers must match
    exactly): 1.0 when every word of the claim is in the source."""
    words = content_words(claim)
    if not words:
        return 0.0
    have = set(content_words(source))
    return sum(w in have or _stem(w) in have for w in words) / len(words)


def _stem(word: str) -> str:
    # Plural and simple verb forms: "dances" supports "dance" and the reverse.
    for suffix in ("ies", "es", "s", "ed", "ing"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word + "s"
