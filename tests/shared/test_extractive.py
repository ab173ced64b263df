"""shared/extractive.py: which sentence of the retrieved passages answers (cosine, the
question's words, the reader's margin), which of the reader's further spans join it, and when
the passages do not hold the answer. The gateway serves these rules and bench/reader_replay.py
replays them, so both are checked here once."""

from __future__ import annotations

import pytest

from shared.extractive import abstains, answer_choice, further_spans, split_passages
from shared.models.reader import Answer
from shared.text import sentence_around

RHINE = "The Rhine rises in the Swiss Alps. It flows roughly 1,230 kilometres to the North Sea."
DANCE = (
    "Foragers perform the waggle dance on the comb. The angle of the run tells the direction "
    "of the food. The length of the run tells the distance. Drones do not forage."
)


def _span(passages: list[str], passage: int, text: str, score: float, no_answer: float) -> Answer:
    start = passages[passage].index(text)
    s, e = sentence_around(passages[passage], start, start + len(text))
    return Answer(passage, start, start + len(text), text, s, e, passages[passage][s:e], score,
                  no_answer)  # fmt: skip


def test_the_answer_weighs_cosine_the_question_words_and_the_reader() -> None:
    question = "How far does the Rhine flow?"
    passages = [
        "Rivers of Europe carry water from the mountains to the seas across many countries.",
        RHINE,
    ]
    sentences = split_passages(passages)
    # The embedder finds the topical sentence of passage 1 closer than the one that answers.
    cosines = [0.7 if s.source == 1 else 0.5 for s in sentences]
    found = [
        [_span(passages, 0, "to the seas", 0.60, 0.30)],
        [_span(passages, 1, "roughly 1,230 kilometres", 0.55, 0.30)],
    ]

    def choose(similarity: float, overlap: float, margin: float) -> tuple[Answer, float]:
        _, span, m = answer_choice(
            question, found, sentences, cosines,
            similarity_weight=similarity, overlap_weight=overlap, margin_weight=margin,
        )  # fmt: skip
        return span, m

    assert choose(1.0, 0.0, 0.25)[0] is found[0][0]
    # "flows" (for "flow") is a third of the question's content words, in the answer's sentence.
    span, margin = choose(1.0, 1.0, 0.25)
    assert span is found[1][0]
    assert span.sentence == "It flows roughly 1,230 kilometres to the North Sea."
    assert margin == 0.55 - 0.30
    # The margin alone: the first span is the more likely.
    assert choose(0.0, 0.0, 1.0)[0] is found[0][0]


def test_a_sentence_without_the_readers_span_can_be_the_answer() -> None:
    """Every sentence competes: when the reader's span of a chunk lies in a sentence that
    bears less on the question, the answer is the better sentence itself, with the margin of
    its chunk's best span (the reader's verdict on whether the chunk answers)."""
    question = "Where does the Rhine rise?"
    passages = [RHINE]
    sentences = split_passages(passages)
    cosines = [0.6, 0.4]
    found = [[_span(passages, 0, "roughly 1,230 kilometres", 0.50, 0.20)]]
    merits, span, margin = answer_choice(
        question, found, sentences, cosines,
        similarity_weight=1.0, overlap_weight=1.0, margin_weight=0.25,
    )  # fmt: skip
    assert (span.start, span.end) == (sentences[0].start, sentences[0].end)
    assert span.text == span.sentence == "The Rhine rises in the Swiss Alps."
    assert margin == 0.50 - 0.20
    assert merits[0] > merits[1]
    # No span read in the chunk: the reader's verdict is "no answer".
    _, span, margin = answer_choice(
        question, [[]], sentences, cosines,
        similarity_weight=1.0, overlap_weight=1.0, margin_weight=0.25,
    )  # fmt: skip
    assert span.text == "The Rhine rises in the Swiss Alps." and margin == -1.0


def test_further_spans_come_from_the_answers_own_passage_when_the_reader_chose_it() -> None:
    passages = [DANCE, RHINE]
    found = [
        [
            _span(passages, 0, "waggle dance", 0.60, 0.10),
            _span(passages, 0, "the direction of the food", 0.30, 0.10),
            _span(passages, 0, "the distance", 0.10, 0.05),  # under a quarter of 0.60
        ],
        [_span(passages, 1, "Swiss Alps", 0.90, 0.05)],
    ]
    best = found[0][0]
    assert further_spans(found, best, min_ratio=0.25, limit=2) == [found[0][1]]
    # At a ratio of 0.1 the third joins too, up to the limit.
    assert further_spans(found, best, min_ratio=0.1, limit=2) == found[0][1:]
    assert further_spans(found, best, min_ratio=0.1, limit=1) == [found[0][1]]
    assert further_spans(found, best, min_ratio=0.1, limit=0) == []
    # A span the reader finds no more likely than "no answer" never joins.
    unsure = [[best, _span(passages, 0, "Drones", 0.50, 0.60)], found[1]]
    assert further_spans(unsure, best, min_ratio=0.1, limit=2) == []
    # A sentence chosen for its cosine and words (not the reader's own span) stands alone.
    sentences = split_passages(passages)
    _, chosen, _ = answer_choice(
        "Where does the Rhine rise?", found, sentences,
        [0.1, 0.1, 0.1, 0.1, 0.9, 0.2],
        similarity_weight=1.0, overlap_weight=0.0, margin_weight=0.0,
    )  # fmt: skip
    assert chosen is found[1][0]
    assert further_spans(found, chosen, min_ratio=0.1, limit=2) == []
    _, chosen, _ = answer_choice(
        "How long is it?", found, sentences,
        [0.1, 0.1, 0.1, 0.1, 0.2, 0.9],
        similarity_weight=1.0, overlap_weight=0.0, margin_weight=0.0,
    )  # fmt: skip
    assert chosen.text == "It flows roughly 1,230 kilometres to the North Sea."
    assert further_spans(found, chosen, min_ratio=0.1, limit=2) == []


@pytest.mark.parametrize(
    ("similarity", "margin", "expected"),
    [
        (0.30, 0.90, True),  # nothing related: abstain, whatever the reader says
        (0.50, 0.10, False),  # related, and the reader finds an answer
        (0.50, -0.20, True),  # related, the reader finds none, nothing close
        (0.65, -0.20, False),  # a close sentence answers without the reader
        (0.50, None, True),  # no reader, nothing close
        (0.65, None, False),
    ],
)
def test_abstention_needs_a_related_sentence_and_the_reader_or_a_close_one(
    similarity: float, margin: float | None, expected: bool
) -> None:
    got = abstains(similarity, margin, min_similarity=0.35, reader_margin=0.0, close_similarity=0.6)
    assert got is expected
