"""Grounding without a service call: evidence selected from the sentences of retrieved passages
by score, and the alignment of an answer's sentences with the sources that support them.
Which sentence answers, and when to abstain, are shared/extractive.py's (the benchmarks replay
them).

Everything here is plain text work on offsets, so that what the gateway highlights is exactly
a slice of the passage it came from. The stages in `chat/stages/evidence.py` and
`chat/stages/answer.py` feed it the scores the embedder and the reader give.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from shared.extractive import Sentence
from shared.models.reader import Answer as Span
from shared.text import WORD, citations, content_words, sentence_spans, support

# Words at the start of a sentence that point back to the one before it.
ANAPHORA = frozenset(
    re.findall(
        r"\S+",
        "it its this these that those they their them he she his her such thus therefore "
        "however hence both moreover furthermore consequently accordingly",
    )
)


AnswerMode = Literal["extractive", "generative", "auto"]
AutoFirst = Literal["reader", "generator"]


def auto_first(setting: str, reader_first_models: Sequence[str], model: str) -> AutoFirst:
    """Who answers first in auto mode: the setting (chat_auto_first) when it names one; for
    `model`, the reader when the generator's model (as its Info names it: a path, a
    registry name, a model server's id) contains one of `reader_first_models`, else the
    generator. A model the packaged 135M outdoes nothing for deserves to write the answer;
    the reader stays the fallback when nothing it writes is supported."""
    if setting in ("reader", "generator"):
        return setting  # type: ignore[return-value]
    name = model.lower()
    small = any(part.lower() in name for part in reader_first_models if part)
    return "reader" if small else "generator"


@dataclass(frozen=True, slots=True)
class GroundingOptions:
    """How a grounded chat answers, decided once from the request, the settings and the
    generator's model."""

    mode: AnswerMode
    evidence_selection: bool  # the prompt holds selected sentences, not whole chunks
    enabled: bool  # citations checked and attributed, unsupported sentences handled, abstention
    unsupported: Literal["drop", "mark"]
    auto_extract_margin: float = 0.0  # auto: the reader's margin from which it answers alone
    first: AutoFirst = "reader"  # auto: who answers first (auto_first)

    @property
    def needs_evidence(self) -> bool:
        return self.evidence_selection or self.enabled or self.mode != "generative"

    @property
    def reader_first(self) -> bool:
        return self.mode == "auto" and self.first == "reader"

    @classmethod
    def of(cls, req: Any, settings: Any, generator_model: str = "") -> GroundingOptions:
        """From a ChatCompletionRequest's answer_mode, evidence_selection and
        enable_grounding (None: the settings' chat_answer_mode, chat_evidence_selection,
        true), and the model the generator serves (auto's order)."""
        mode = req.answer_mode or settings.chat_answer_mode
        enabled = True if req.enable_grounding is None else req.enable_grounding
        return cls(
            mode=mode,
            evidence_selection=(
                settings.chat_evidence_selection
                if req.evidence_selection is None
                else req.evidence_selection
            ),
            # An extractive or auto answer is grounded by construction.
            enabled=enabled or mode != "generative",
            unsupported=settings.chat_unsupported,
            auto_extract_margin=settings.chat_auto_extract_margin,
            first=auto_first(
                settings.chat_auto_first, settings.chat_reader_first_models, generator_model
            ),
        )


@dataclass(frozen=True, slots=True)
class Reading:
    """The reader's verdict over the chat's sources: its best span (source numbered from 1,
    offsets into that source's text), and how sure it is that they hold an answer at all."""

    source: int
    span: Span
    margin: float  # span probability minus no-answer probability, in [-1, 1]
    # Further answer sentences (source, span) the reader finds nearly as likely, best first.
    more: tuple[tuple[int, Span], ...] = ()

    def renumber(self, new: dict[int, int]) -> Reading:
        return Reading(
            new[self.source], self.span, self.margin, tuple((new[n], s) for n, s in self.more)
        )

    def parts(self) -> list[tuple[int, Span]]:
        """The best span and the further ones, in source and then text order."""
        found = [(self.source, self.span), *self.more]
        return sorted(found, key=lambda p: (p[0], p[1].sentence_start))


@dataclass(slots=True)
class Evidence:
    """What the answer is drawn from: scored sentences, and those selected for the prompt."""

    sentences: list[Sentence]
    scores: list[float]  # one per sentence: how much it bears on the question
    selected: list[int] = field(default_factory=list)  # indices into sentences, in text order
    # The embedder's cosine of each sentence with the question (scores may add the reader's
    # verdict on top): what abstention compares with its threshold.
    cosine: list[float] = field(default_factory=list)

    def by_source(self) -> dict[int, list[Sentence]]:
        out: dict[int, list[Sentence]] = {}
        for i in self.selected:
            s = self.sentences[i]
            out.setdefault(s.source, []).append(s)
        return out

    def renumber(self, numbers: dict[int, int]) -> None:
        """The sources were reordered: old number -> new number."""
        self.sentences = [dataclasses.replace(s, source=numbers[s.source]) for s in self.sentences]

    def best(self) -> tuple[Sentence, float] | None:
        if not self.sentences:
            return None
        i = max(range(len(self.scores)), key=self.scores.__getitem__)
        return self.sentences[i], self.scores[i]


def select(
    evidence: Evidence,
    *,
    max_sentences: int,
    max_chars: int,
    min_score: float,
    neighbours: bool = True,
) -> list[int]:
    """The best-scoring sentences (at least one, while any exists), each with the sentence
    before it when it opens with a word that points back ("It", "These", "However"...), until
    `max_sentences` or `max_chars`; returned in passage and text order."""
    order = sorted(range(len(evidence.sentences)), key=lambda i: -evidence.scores[i])
    index = {(s.source, s.position): i for i, s in enumerate(evidence.sentences)}
    # min_score is a cosine: the scores add the question's words (and the reader) to it.
    closeness = evidence.cosine or evidence.scores
    chosen: set[int] = set()
    chars = 0
    for i in order:
        if len(chosen) >= max_sentences:
            break
        if chosen and closeness[i] < min_score:
            continue
        s = evidence.sentences[i]
        wanted = [i]
        first = _first_word(s.text)
        before = index.get((s.source, s.position - 1))
        if neighbours and before is not None and (first in ANAPHORA or len(s.text) < 60):
            wanted.insert(0, before)
        new = [j for j in wanted if j not in chosen]
        cost = sum(len(evidence.sentences[j].text) + 1 for j in new)
        if chosen and chars + cost > max_chars:
            continue
        chosen.update(new)
        chars += cost
    return sorted(chosen, key=lambda j: (evidence.sentences[j].source, evidence.sentences[j].start))


def evidence_text(passage: str, sentences: Sequence[Sentence]) -> str:
    """The selected sentences of one passage, in order, with an ellipsis where text was
    skipped between them."""
    parts: list[str] = []
    last_end = None
    for s in sorted(sentences, key=lambda s: s.start):
        if last_end is not None and passage[last_end : s.start].strip():
            parts.append("…")
        parts.append(s.text)
        last_end = s.end
    return " ".join(parts)


# -- alignment of an answer with its sources (word overlap: shared/text/words.py) -------------


@dataclass(frozen=True, slots=True)
class Claim:
    """One sentence of an answer, aligned with the sources."""

    text: str  # without its [n] markers
    cited: tuple[int, ...]  # what the model cited
    source: int  # the supporting source (0: none)
    support: float
    attributed: bool  # the gateway chose the source (the model cited none, or a wrong one)

    @property
    def supported(self) -> bool:
        return self.source > 0


def answer_sentences(answer: str) -> list[str]:
    """The answer's sentences, each with the [n] markers that follow it."""
    text = citations.citations_inside(answer.strip())
    return [text[s.start : s.end].strip() for s in sentence_spans(text, 10_000)]


def align(answer: str, sources: dict[int, str], threshold: float) -> list[Claim]:
    """Each sentence of the answer with the source that supports it best: the one it cites
    when that supports it (ties go to the model's citation), else the best-supporting one."""
    claims = []
    for sentence in answer_sentences(answer):
        cited = citations.cited(sentence)
        bare = citations.without_citations(sentence).strip()
        if not content_words(bare):
            continue  # "Yes." or a stray marker: nothing to ground
        scores = {n: support(bare, text) for n, text in sources.items()}
        valid = [n for n in cited if n in sources]
        best_cited = max(valid, key=lambda n: scores[n], default=0)
        best_any = max(scores, key=lambda n: scores[n], default=0)
        if best_cited and scores[best_cited] >= threshold:
            claims.append(Claim(bare, cited, best_cited, scores[best_cited], False))
        elif best_any and scores[best_any] >= threshold:
            claims.append(Claim(bare, cited, best_any, scores[best_any], True))
        else:
            claims.append(Claim(bare, cited, 0, scores.get(best_any, 0.0), False))
    return claims


def complete_sentences(buffer: str) -> tuple[list[str], str]:
    """The sentences of a streamed answer that are complete (the next one has begun with a
    letter or digit, so a citation after the full stop has arrived), and the rest."""
    text = citations.citations_inside(buffer)
    spans = sentence_spans(text, 10_000)
    if len(spans) < 2 or not text[spans[-1].start].isalnum():
        return [], buffer
    done = [text[s.start : s.end] for s in spans[:-1]]
    return done, text[spans[-1].start :]


def _first_word(text: str) -> str:
    m = WORD.search(text.lower())
    return m.group(0) if m else ""
