"""The extractive answer over retrieved passages: their sentences, which sentence answers the
question, which further sentences join it, and when to say the passages do not hold it.

The gateway's evidence and answer stages (services/gateway/chat/) decide with these functions,
and `bench/reader_replay.py` replays them offline on stored search results, so a rule changed
here is measured as it is served. Plain text work on offsets and scores: the embedder's cosines
and the reader's spans (shared/models/reader.py) come in, nothing is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.models.reader import Answer as Span
from shared.text import sentence_spans, support

# The longest sentence of a passage before the splitter cuts it (evidence and answers).
SENTENCE_CHARS = 400


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of passage `source` (1-based, the [n] of the prompt), `text ==
    passage.text[start:end]`."""

    source: int
    start: int
    end: int
    text: str
    position: int  # index among its passage's sentences


def split_passages(texts: Sequence[str], max_chars: int = SENTENCE_CHARS) -> list[Sentence]:
    """Every sentence of every passage, passages numbered from 1."""
    out = []
    for n, text in enumerate(texts, start=1):
        for pos, span in enumerate(sentence_spans(text, max_chars)):
            out.append(Sentence(n, span.start, span.end, text[span.start : span.end], pos))
    return out


def answer_choice(
    question: str,
    found: Sequence[Sequence[Span]],
    sentences: Sequence[Sentence],
    cosines: Sequence[float],
    *,
    similarity_weight: float,
    overlap_weight: float,
    margin_weight: float,
) -> tuple[list[float], Span, float]:
    """How much each sentence bears on the question, the answer, and the reader's margin
    for it. `found` holds the reader's spans of each passage, best first; `sentences` are
    numbered from 1, as split_passages numbers them.

    A sentence's merit is `similarity_weight` times its cosine with the question, plus
    `overlap_weight` times the share of the question's content words it holds, plus
    `margin_weight` times the reader's margin (answer minus no-answer probability) where its
    passage's best span lies in it. The answer is the best sentence: the reader's span when
    it lies there, else the sentence itself. The margin is that of the passage's best span
    (-1 when the reader read none): whether the reader thinks the chunk answers at all.

    Every sentence competes, not only those of the reader's spans: on COVID-QA its spans
    rank chunks badly, and the best sentence by cosine and words alone scored token F1 0.271
    on test and 0.198 on dev against 0.259 and 0.170 for the reader's (docs/benchmarks.md).
    The margin alone picked "the same waggle dance" of the swarming paragraph for "how do
    honeybees tell each other where food is?"; the cosine alone ranks a sentence on the same
    topic as high as the one that names what was asked."""
    firsts = {p: answers[0] for p, answers in enumerate(found) if answers}

    def reader_span(s: Sentence) -> Span | None:
        a = firsts.get(s.source - 1)
        return a if a is not None and a.text and a.start < s.end and s.start < a.end else None

    merits = []
    for s, cosine in zip(sentences, cosines, strict=True):
        merit = similarity_weight * cosine
        if overlap_weight:
            merit += overlap_weight * support(question, s.text)
        a = reader_span(s) if margin_weight else None
        if a is not None:
            merit += margin_weight * (a.score - a.no_answer)
        merits.append(merit)
    chosen = sentences[max(range(len(sentences)), key=merits.__getitem__)]
    first = firsts.get(chosen.source - 1)
    margin = -1.0 if first is None else first.score - first.no_answer
    span = reader_span(chosen)
    if span is None:
        span = Span(
            chosen.source - 1, chosen.start, chosen.end, chosen.text, chosen.start, chosen.end,
            chosen.text, first.score if first else 0.0, first.no_answer if first else 1.0,
        )  # fmt: skip
    return merits, span, margin


def further_spans(
    found: Sequence[Sequence[Span]], best: Span, *, min_ratio: float, limit: int
) -> list[Span]:
    """The reader's next spans that join the answer `best` (as answer_choice returned it):
    at most `limit`, in other sentences of its passage, each at least `min_ratio` times as
    likely as it. None unless `best` is the reader's own first span there.

    Only from the answer's own passage: the answer goes on there (the dance, then what its
    angle and length say), and another chunk's likely span more often answers something else.
    A sentence chosen for its cosine and words, not the reader's span, stands alone."""
    spans = found[best.passage] if best.passage < len(found) else ()
    if not spans or spans[0] is not best or limit <= 0:
        return []
    floor = best.score * min_ratio
    return [
        a
        for a in spans[1:]
        if a.has_answer and a.score >= floor and a.sentence_start != best.sentence_start
    ][:limit]


def abstains(
    similarity: float,
    margin: float | None,
    *,
    min_similarity: float,
    reader_margin: float,
    close_similarity: float,
) -> bool:
    """Whether the passages do not hold the answer: no sentence has cosine `min_similarity`
    with the question, or the reader finds no span `reader_margin` more likely than "no
    answer" (`margin`, None without a reader) and no sentence is as close as
    `close_similarity`."""
    reader_says = margin is not None and margin >= reader_margin
    related = similarity >= min_similarity
    close = similarity >= close_similarity
    return not (related and (reader_says or close))
