"""bench/reader_replay.py: the offline replay answers and abstains by the gateway's own rules
(shared/extractive.py) on a stored dump, and scores what it would have answered."""

from __future__ import annotations

import argparse

import pytest

from bench.reader_replay import answer, replay
from shared.extractive import split_passages
from shared.models.reader import Answer
from shared.text import sentence_around

DANCE = (
    "Foragers perform the waggle dance on the comb. The angle of the run tells the direction "
    "of the food. The length of the run tells the distance."
)
RHINE = "The Rhine rises in the Swiss Alps. It flows roughly 1,230 kilometres to the North Sea."
ARGS = argparse.Namespace(
    chunks=4, similarity_weight=1.0, overlap_weight=1.0, margin_weight=0.25, min_ratio=0.25,
    max_sentences=2, close=0.6,
)  # fmt: skip


def span(texts: list[str], passage: int, text: str, score: float, no: float) -> Answer:
    start = texts[passage].index(text)
    s, e = sentence_around(texts[passage], start, start + len(text))
    return Answer(passage, start, start + len(text), text, s, e, texts[passage][s:e], score, no)


def item(question: str, answers: list[str], cosines: list[float], answerable: bool) -> dict:
    """One dumped question over the two passages (as `dump` stores it), read by hand."""
    texts = [DANCE, RHINE]
    it = iter(cosines)
    chunks = [
        {"document_id": f"doc-{n}", "text": t,
         "sentences": [[s.start, s.end, next(it)] for s in split_passages([t])]}
        for n, t in enumerate(texts)
    ]  # fmt: skip
    found = [
        [span(texts, 0, "the direction of the food", 0.6, 0.1),
         span(texts, 0, "the distance", 0.3, 0.1)],
        [span(texts, 1, "Swiss Alps", 0.2, 0.5)],
    ]  # fmt: skip
    row = {"question": question, "answers": answers, "document_id": "doc-0",
           "answerable": answerable, "chunks": chunks}  # fmt: skip
    return {"row": row, "found": found}


def bees_answer() -> dict:
    """An answerable question whose closest sentence holds the reader's best span."""
    return answer(
        item("How do bees tell the direction of food?", ["the direction of the food"],
             [0.5, 0.7, 0.4, 0.2, 0.1], True),
        ARGS,
    )  # fmt: skip


def test_the_replayed_answer_is_the_gateways_extract_with_its_further_sentence() -> None:
    a = bees_answer()
    # The reader's span's sentence and its chunk's next span's sentence, in text order.
    assert a["margin"] == pytest.approx(0.5)
    assert a["gold_cited"] is True and a["contained"] == 1.0
    assert 0 < a["f1"] < 1  # two sentences against a short gold answer
    assert a["similarity"] == 0.7


def test_the_replay_abstains_as_the_gateway_does_and_counts_each_kind() -> None:
    answerable = bees_answer()
    # Closest to the Rhine's chunk, where the reader finds no answer: abstains at margin 0.
    unanswerable = answer(
        item("Where does the Danube rise?", ["the Black Forest"], [0.1, 0.1, 0.1, 0.5, 0.3],
             False),
        ARGS,
    )  # fmt: skip
    assert unanswerable["margin"] == pytest.approx(-0.3)
    got = replay([answerable, unanswerable], ARGS, 0.35, 0.0)
    assert got["abstain_unanswerable"] == 1.0 and got["abstain_answerable"] == 0.0
    assert got["cited_precision"] == 1.0 and got["f1"] == answerable["f1"]
    # A floor above every cosine: both abstain, and the answerable one scores nothing.
    got = replay([answerable, unanswerable], ARGS, 0.8, 0.0)
    assert got["abstain_answerable"] == 1.0 and got["f1"] == 0.0
