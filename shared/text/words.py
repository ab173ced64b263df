"""Words of a text: how the project tokenises text for word overlap.

- `content_words` and `support`: the content words of a text (`WORD`, less `STOPWORDS`),
  and the share of a claim's content words that a source holds. The gateway's grounding and
  the benches that replay it check a generated sentence against the sources with them,
  attribute it, and weigh how much a sentence bears on a question.
- `words`: lower-cased `\\w+` runs, nothing dropped. The generator's grounding set picks its
  evidence sentences with them, and its answers are scored over them
  (`token_f1(..., tokens=words)`).
- `overlap_words`: lower-cased `[a-z0-9]+` runs of two or more characters, less a short stop
  list (`OVERLAP_STOPWORDS`): the guardrails' grounding rail ranks the context sentences
  a claim may rest on by them.

SQuAD's answer normalisation is in `qa_metrics`."""

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


# -- plain words ------------------------------------------------------------------------------

_PLAIN_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """Lower-cased `\\w+` runs, in order, nothing dropped."""
    return _PLAIN_WORD.findall(text.lower())


# -- the grounding rail's overlap words -------------------------------------------------------

_OVERLAP_WORD = re.compile(r"[a-z0-9]+")
# Words too common to tell which context sentence a claim rests on.
OVERLAP_STOPWORDS = frozenset(
    re.findall(
        r"\S+",
        "a an and are as at be been but by can did do does for from had has have he her his how "
        "i if in into is it its may more most no not of on or our she so such than that the "
        "their them then there these they this those to under up was we were what when where "
        "which while who why will with would you your",
    )
)


def overlap_words(text: str) -> set[str]:
    return {
        w for w in _OVERLAP_WORD.findall(text.lower()) if w not in OVERLAP_STOPWORDS and len(w) > 1
    }
