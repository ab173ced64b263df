"""chat/grounding.py: sentences with exact offsets, evidence selection with neighbours, and the
alignment of an answer's sentences with the sources that support them (attribution)."""

from __future__ import annotations

from services.gateway.chat.grounding import (
    Evidence,
    align,
    answer_sentences,
    complete_sentences,
    evidence_text,
    select,
    support,
)
from shared.extractive import split_passages
from shared.text import citations, sentence_around, sentence_spans, with_citation
from tests.conftest import REPO

HONEYBEE = (REPO / "samples" / "corpus" / "honeybee-colonies.md").read_text()
DANCE = (
    "A forager that has found a rich patch of flowers returns to the hive and performs the "
    "waggle dance on the vertical comb. She runs a short straight line while waggling her "
    "body, then circles back and repeats. The angle of the straight run relative to vertical "
    "tells her sisters the direction of the food relative to the sun, and the length of the "
    "waggle run tells them the distance."
)
RHINE = "The Rhine rises in the Swiss Alps. It flows roughly 1,230 kilometres to the North Sea."


def test_sentences_are_exact_slices() -> None:
    text = (
        "Smith et al. (2020) found it, e.g. in mice. Dr. J. Watson agreed. Yields were 3.5 "
        "times higher! Why?\n\n## Methods\n- first item\n- second item"
    )
    spans = sentence_spans(text)
    got = [text[s.start : s.end] for s in spans]
    assert got == [
        "Smith et al. (2020) found it, e.g. in mice.",
        "Dr. J. Watson agreed.",
        "Yields were 3.5 times higher!",
        "Why?",
        "## Methods",
        "- first item",
        "- second item",
    ]
    # Deep into a long article the same rules hold: the splitter looks only a little way
    # back for the word before a stop, not over all the text before it.
    filler = "Cells were counted twice. " * 4000
    deep = [filler + text[s.start : s.end] for s in spans[:2]]
    assert [d[s.start : s.end] for d in deep for s in sentence_spans(d)[-1:]] == got[:2]
    lengthy = "Cells " + "x" * 150 + ". The word before the stop is long."
    assert [lengthy[s.start : s.end] for s in sentence_spans(lengthy)][1] == (
        "The word before the stop is long."
    )
    # A run-on "sentence" is cut near max_chars, at a space.
    long = " ".join(["word"] * 200)
    assert all(s.end - s.start <= 100 for s in sentence_spans(long, max_chars=100))
    # The sentence around a span: every sentence the span touches.
    start = DANCE.index("direction")
    lo, hi = sentence_around(DANCE, start, start + 9)
    assert DANCE[lo:hi].startswith("The angle of the straight run")
    lo, hi = sentence_around(DANCE, DANCE.index("circles"), DANCE.index("direction"))
    assert DANCE[lo:hi].startswith("She runs") and DANCE[lo:hi].endswith("the distance.")


def test_selection_keeps_the_best_with_the_sentence_they_refer_to() -> None:
    sentences = split_passages([DANCE, RHINE])
    assert [s.source for s in sentences] == [1, 1, 1, 2, 2]
    for s in sentences:
        assert [DANCE, RHINE][s.source - 1][s.start : s.end] == s.text
    # "It flows..." is the best sentence; it points back, so "The Rhine rises..." comes too.
    evidence = Evidence(sentences, [0.5, 0.1, 0.6, 0.2, 0.9])
    chosen = select(evidence, max_sentences=3, max_chars=1000, min_score=0.3)
    assert [(sentences[i].source, sentences[i].position) for i in chosen] == [
        (1, 2),
        (2, 0),
        (2, 1),
    ]
    # The budget in characters, and the floor on scores (the best one is always kept).
    assert select(evidence, max_sentences=9, max_chars=10, min_score=0.3) == [3, 4]
    assert select(evidence, max_sentences=9, max_chars=5000, min_score=0.95) == [3, 4]
    evidence.selected = select(evidence, max_sentences=3, max_chars=5000, min_score=0.0)
    by_source = evidence.by_source()
    assert evidence_text(DANCE, by_source[1]) == sentences[2].text
    skipped = evidence_text(DANCE, [sentences[0], sentences[2]])
    assert skipped == f"{sentences[0].text} … {sentences[2].text}"


def test_support_and_alignment() -> None:
    sources = {1: DANCE, 2: RHINE}
    assert support("The waggle dance tells the distance.", DANCE) == 1.0
    assert support("The moon is made of cheese.", DANCE) == 0.0
    assert support("The Rhine is 2,000 kilometres long.", RHINE) < 0.75  # numbers must match
    answer = (
        "Bees perform the waggle dance [2]. The angle of the run gives the direction. "
        "It flows to the North Sea [2]. Bees speak French."
    )
    claims = align(answer, sources, threshold=0.75)
    assert [(c.source, c.attributed) for c in claims] == [
        (1, True),
        (1, True),
        (2, False),
        (0, False),
    ]
    assert [c.cited for c in claims] == [(2,), (), (2,), ()]
    assert not claims[3].supported and claims[0].text == "Bees perform the waggle dance."


def test_answer_sentences_and_citations() -> None:
    assert answer_sentences("Bees dance. [1] They use the sun [1][2]. Fine") == [
        "Bees dance [1].",
        "They use the sun [1][2].",
        "Fine",
    ]
    assert with_citation("Bees dance.", 2) == "Bees dance [2]."
    assert with_citation("Bees dance", 2) == "Bees dance [2]"
    # Streaming: a sentence is complete once the next one has begun (after its citation).
    assert complete_sentences("Bees dance. [1") == ([], "Bees dance. [1")
    assert complete_sentences("Bees dance. [1] Th") == (["Bees dance [1]."], "Th")
    assert complete_sentences("Bees dance") == ([], "Bees dance")


def test_citation_markers_read_and_removed_by_one_owner() -> None:
    # The gateway's alignment and bench/qa/scoring.py both read markers here: a paper's own
    # reference range copied into an answer is not words of it, nor a source we gave.
    text = "Bees dance [1, 2]. Wasps do not [4-7]. Ants [3]"
    assert citations.without_citations(text) == "Bees dance. Wasps do not. Ants"
    assert citations.cited(text) == (1, 2, 3)
    assert citations.citations_inside("the sun. [1][2] The") == "the sun [1][2]. The"


def test_the_sample_corpus_has_the_waggle_dance_in_one_sentence() -> None:
    # The sample question's answer is one sentence of the sample corpus: what the default
    # stack's extractive path can return whole.
    texts = [HONEYBEE[s.start : s.end] for s in sentence_spans(HONEYBEE)]
    assert any("direction of the food" in t and "distance" in t for t in texts)
