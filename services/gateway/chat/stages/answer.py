"""How a grounded chat answers: abstain, extract, or generate and keep what the sources support.

    answer_mode  extractive  the reader's answer (its sentences, or its span) with its [n]
                 generative  the generator's answer from the selected evidence; every sentence
                             is checked against the sources: cited by the model when its
                             citation holds, else attributed to the source that supports it
                             best (and the answer says so), else dropped or marked
                 auto        (the default) reader first or generator first, as
                             chat_auto_first decides from the generator's model:
                             reader first (the packaged SmolLM2-135M): extractive when
                             the reader finds an answer (chat_auto_extract_margin), else
                             generative; generator first (any other model): generative.
                             Either way, when no generated sentence is supported, the
                             extracted sentence instead

Before any of them, `DecideAbstention` asks whether the sources hold an answer at all: when
no sentence is even related to the question, or the reader finds no span more likely than
"no answer" and no sentence comes close to it, the reply is the abstention ("The documents
do not say.") with the closest sources, and nothing is generated.

Support is alignment (chat/grounding.py): the share of a sentence's content words that a
source holds. While streaming, each sentence is sent once it is complete and supported, so
the first words arrive with the first grounded sentence.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from services.gateway.chat import grounding
from services.gateway.chat.protocol import AnswerReport, EvidenceSpan
from services.gateway.chat.stages import Stage
from services.gateway.chat.stages.generate import Generate
from services.gateway.chat.state import Answer, ChatState
from services.gateway.settings import GatewaySettings
from shared.extractive import abstains
from shared.text import sentence_spans, with_citation, without_citations


class DecideAbstention(Stage):
    """Marks a chat whose sources do not hold the answer (chat.abstain)."""

    name = "abstention"

    def applies(self, chat: ChatState) -> bool:
        return chat.evidence is not None and chat.options.grounding.enabled

    async def run(self, chat: ChatState) -> None:
        assert chat.evidence is not None
        if not chat.evidence.sentences:
            chat.abstain = True
            return
        g = self.settings
        chat.abstain = abstains(
            max(chat.evidence.cosine, default=-1.0),
            None if chat.reading is None else chat.reading.margin,
            min_similarity=g.chat_abstain_min_similarity,
            reader_margin=g.chat_abstain_reader_margin,
            close_similarity=g.chat_abstain_similarity,
        )


def _report(chat: ChatState) -> AnswerReport:
    if chat.answer_report is None:
        chat.answer_report = AnswerReport(
            mode="generative",
            reader_margin=None if chat.reading is None else round(chat.reading.margin, 4),
            auto_first=(
                chat.options.grounding.first if chat.options.grounding.mode == "auto" else None
            ),
            similarity=(
                round(max(chat.evidence.cosine), 4)
                if chat.evidence is not None and chat.evidence.cosine
                else None
            ),
        )
    return chat.answer_report


def _highlight(chat: ChatState, source: int, start: int, end: int, kind: str) -> None:
    text = chat.passages[source - 1].text
    spans = chat.highlights.setdefault(source, [])
    span = EvidenceSpan(start=start, end=end, text=text[start:end], kind=kind)  # type: ignore[arg-type]
    if span not in spans:
        spans.append(span)


class Abstain:
    """The documents do not hold the answer: say so, and name the closest sources."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings

    def text(self, chat: ChatState) -> str:
        names = list(dict.fromkeys(p.document_name for p in chat.passages))[:3]
        closest = f" The closest sources: {', '.join(names)}." if names else ""
        return f"{self.settings.chat_abstention}{closest}"

    async def complete(self, chat: ChatState) -> None:
        chat.answer = Answer(self.text(chat), "stop")
        report = _report(chat)
        report.mode = "abstained"
        report.abstained = True

    async def stream(self, chat: ChatState) -> AsyncIterator[str]:
        await self.complete(chat)
        assert chat.answer is not None
        yield chat.answer.text


class Extract:
    """The reader's answer with its citations: the sentence of its best span and of its next
    best spans in other sentences (chat_extractive_unit sentence, up to
    chat_extractive_max_sentences, each ending with its [n]) or the best span alone (span);
    without a reader, the sentence closest to the question."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings

    def parts(self, chat: ChatState) -> list[tuple[str, int]]:
        """The extracted texts with their source numbers; highlights them in those sources."""
        if chat.reading is not None:
            r = chat.reading
            if self.settings.chat_extractive_unit == "span":
                _highlight(chat, r.source, r.span.start, r.span.end, "answer")
                _highlight(chat, r.source, r.span.sentence_start, r.span.sentence_end, "sentence")
                return [(r.span.text, r.source)]
            out = []
            for source, span in r.parts():
                _highlight(chat, source, span.start, span.end, "answer")
                _highlight(chat, source, span.sentence_start, span.sentence_end, "sentence")
                out.append((span.sentence, source))
            return out
        assert chat.evidence is not None
        best = chat.evidence.best()
        assert best is not None
        s = best[0]
        _highlight(chat, s.source, s.start, s.end, "sentence")
        return [(s.text, s.source)]

    def text(self, chat: ChatState) -> str:
        # The document's own reference marks ("[6, 18]") would read as the gateway's [n].
        return " ".join(
            with_citation(without_citations(text), source) for text, source in self.parts(chat)
        )

    async def complete(self, chat: ChatState) -> None:
        chat.answer = Answer(self.text(chat), "stop")
        chat.grounded = True  # the sources' own sentences
        report = _report(chat)
        report.mode = "extractive"

    async def stream(self, chat: ChatState) -> AsyncIterator[str]:
        await self.complete(chat)
        assert chat.answer is not None
        yield chat.answer.text


class GroundedGenerate:
    """The generator's answer, sentence by sentence, each kept only with a source that
    supports it (answer_mode generative and auto)."""

    def __init__(self, generate: Generate, settings: GatewaySettings) -> None:
        self.generate = generate
        self.settings = settings
        self.extract = Extract(settings)
        self.abstain = Abstain(settings)

    def _sources(self, chat: ChatState) -> dict[int, str]:
        assert chat.prompt is not None
        return {n: p.text for n, p in enumerate(chat.prompt.sources, start=1)}

    def _ground(self, chat: ChatState, sentence: str, kept: list[str]) -> tuple[str | None, bool]:
        """The sentence as sent (with its [n]), or None when it is left out; and whether it
        was left out for want of support (not as a repeat or a sentence with no claim)."""
        report = _report(chat)
        sources = self._sources(chat)
        claims = grounding.align(sentence, sources, self.settings.chat_support_threshold)
        if not claims:
            return None, False
        claim = claims[0]
        if claim.supported:
            out = with_citation(claim.text, claim.source)
            if out in kept:
                return None, False  # a small model repeating itself
            if claim.attributed:
                report.attributed = True
            self._highlight_support(chat, claim)
            return out, False
        report.unsupported.append(claim.text)
        if chat.options.grounding.unsupported == "mark":
            return f"{claim.text} [unsupported]", False
        return None, True

    def _highlight_support(self, chat: ChatState, claim: grounding.Claim) -> None:
        """Highlights the sentence of the source that supports the claim best."""
        text = chat.passages[claim.source - 1].text
        spans = sentence_spans(text)
        if spans:
            best = max(spans, key=lambda s: grounding.support(claim.text, text[s.start : s.end]))
            _highlight(chat, claim.source, best.start, best.end, "support")

    @staticmethod
    def _last(chat: ChatState, text: str) -> list[str]:
        """The sentences of `text`, less a last one that max_tokens cut off mid-way: a
        fragment states nothing to check."""
        sentences = grounding.answer_sentences(text)
        cut = chat.answer is not None and chat.answer.finish_reason == "length"
        if (
            cut
            and sentences
            and not without_citations(sentences[-1]).rstrip().endswith((".", "!", "?"))
        ):
            sentences.pop()
        return sentences

    def _fallback(self, chat: ChatState) -> str:
        """Nothing the model wrote is supported: the extracted sentence (auto), else the
        abstention."""
        report = _report(chat)
        if chat.options.grounding.mode == "auto":
            report.mode = "extractive"
            chat.grounded = True
            return self.extract.text(chat)
        report.mode = "abstained"
        report.abstained = True
        return self.abstain.text(chat)

    async def complete(self, chat: ChatState) -> None:
        # The same path as a stream, so that both give the same answer (and stop as early).
        async for _ in self.stream(chat):
            pass

    async def stream(self, chat: ChatState) -> AsyncIterator[str]:
        """Each generated sentence once it is complete and supported. In auto mode with the
        reader first (and chat_stop_at_unsupported) the first sentence left out for want of
        support ends the generation: a small model seldom gets back on track, and its time
        goes to nothing. A model answering first writes on; what is unsupported is dropped."""
        kept: list[str] = []
        buffer = ""
        count = 0
        stop_early = chat.options.grounding.reader_first and self.settings.chat_stop_at_unsupported
        stopped = False
        started = time.perf_counter()
        pieces = self.generate.stream(chat)
        try:
            async for piece in pieces:
                count += 1
                buffer += piece
                done, buffer = grounding.complete_sentences(buffer)
                for sentence in done:
                    out, unsupported = self._ground(chat, sentence, kept)
                    if out:
                        yield (" " if kept else "") + out
                        kept.append(out)
                    elif unsupported and stop_early:
                        stopped = True
                        break
                if stopped:
                    break
        finally:
            await pieces.aclose()  # stopped early: the generator's call is cancelled
        if chat.answer is None:  # the generation did not run to its end
            assert chat.prompt is not None
            chat.answer = Answer("", "stop", chat.prompt.prompt_tokens, count)
            chat.timings.generation_ms = chat.ms_since(started)
        if not stopped:
            for sentence in self._last(chat, buffer):
                out, _ = self._ground(chat, sentence, kept)
                if out:
                    yield (" " if kept else "") + out
                    kept.append(out)
        if not kept:
            chat.answer.text = self._fallback(chat)
            yield chat.answer.text
        else:
            chat.answer.text = " ".join(kept)
            # Each kept sentence is supported, unless unsupported ones were kept marked.
            chat.grounded = chat.options.grounding.unsupported == "drop" or not (
                _report(chat).unsupported
            )


class Answerers:
    """Which way a chat is answered: plain generation without a knowledge base or with
    grounding off, else abstention, extraction or grounded generation."""

    def __init__(self, generate: Generate, settings: GatewaySettings) -> None:
        self.generate = generate
        self.abstain = Abstain(settings)
        self.extract = Extract(settings)
        self.grounded = GroundedGenerate(generate, settings)

    def pick(self, chat: ChatState) -> Generate | Abstain | Extract | GroundedGenerate:
        g = chat.options.grounding
        if chat.evidence is None:
            return self.generate
        if chat.abstain:
            return self.abstain
        if self.extracts(chat):
            return self.extract
        return self.grounded if g.enabled else self.generate

    @staticmethod
    def extracts(chat: ChatState) -> bool:
        """Extractive mode, or auto with the reader first and sure enough of its answer."""
        g = chat.options.grounding
        if g.mode == "extractive":
            return True
        return (
            g.reader_first
            and chat.reading is not None
            and chat.reading.margin >= g.auto_extract_margin
        )

    @staticmethod
    def generates(chat: ChatState) -> bool:
        """Whether the chosen way calls the generator (else no prompt is counted)."""
        return chat.evidence is None or not (chat.abstain or Answerers.extracts(chat))
