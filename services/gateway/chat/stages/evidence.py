"""Evidence selection ("contextual compression"), between the retrieval rails and the prompt.

The retrieved chunks are cut into sentences, each scored against the question with the
embedder (cosine of the question's query embedding and the sentence's passage embedding)
and the question's words, and the extractive reader reads the chunks for answer spans
(answer_choice in shared/extractive.py weighs the three). The answer's sentence comes first,
then the best-scoring others (with the sentence before one that opens with "It",
"These"...) up to `chat_evidence_max_sentences` / `chat_evidence_max_chars`: about 100-300
prompt tokens instead of whole chunks, which a small model gets lost in less and reads
faster. The chunks stay the chat's sources (citations), numbered as retrieved.

`EvidencePrompt` is the prompt stage for such a chat: each source block holds only its
selected sentences (a source with none is left out of the prompt, its number kept).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import numpy as np

from services.gateway.chat.grounding import Evidence, Reading, evidence_text, select
from services.gateway.chat.stages import Stage
from services.gateway.chat.stages.answer import Answerers
from services.gateway.chat.stages.prompt import BuildPrompt
from services.gateway.chat.state import ChatState, Prompt
from services.gateway.http.clients import Services
from services.gateway.settings import GatewaySettings
from shared.extractive import answer_choice, further_spans, split_passages
from shared.models import registry
from shared.models.reader import ROLE, Reader

log = logging.getLogger("ragrail.gateway")


def load_reader(settings: GatewaySettings) -> Reader | None:
    """The reader the settings name (a registry ref), the newest registered one when they
    name none, or None ("none", or no reader trained: answers fall back to the embedder's
    best sentence, with a warning)."""
    ref = settings.chat_reader_model
    if ref == "none":
        return None
    try:
        return Reader.from_registry(ref, threads=settings.chat_reader_threads)
    except (LookupError, OSError) as exc:
        if ref:
            raise  # a reader asked for by name must exist: a clear error at start-up
        log.warning("no extractive reader: %s", exc)
        return None


class ReaderSlot:
    """The gateway's reader. With none configured and none trained at start-up, it looks in
    the registry again before each question, so a reader trained while the gateway runs (by
    `ragrail up` on a first start, or by hand) answers from then on, with no restart."""

    def __init__(self, settings: GatewaySettings, reader: Reader | None) -> None:
        self.settings = settings
        self.reader = reader
        self.failed: set[str] = set()  # readers that did not load: said once, not retried

    @property
    def may_appear(self) -> bool:
        return self.reader is None and not self.settings.chat_reader_model

    async def get(self) -> Reader | None:
        if not self.may_appear:
            return self.reader
        found = registry.entries(ROLE)
        if not found or str(found[-1].path) in self.failed:
            return None
        try:
            self.reader = await asyncio.to_thread(
                Reader.load, found[-1].path, threads=self.settings.chat_reader_threads
            )
        except (LookupError, OSError, ValueError) as exc:
            self.failed.add(str(found[-1].path))
            log.warning("the reader at %s did not load: %s", found[-1].path, exc)
            return None
        log.info("extractive reader loaded from %s", found[-1].path)
        return self.reader


class SelectEvidence(Stage):
    name = "evidence"
    timing = "prompt_ms"

    def __init__(
        self, services: Services, settings: GatewaySettings, reader: Reader | None
    ) -> None:
        super().__init__(services, settings)
        self.reader = ReaderSlot(settings, reader)

    def applies(self, chat: ChatState) -> bool:
        return bool(chat.options.plan.collections) and chat.options.grounding.needs_evidence

    async def run(self, chat: ChatState) -> None:
        question = chat.turns[-1].text
        texts = [p.text for p in chat.passages]
        sentences = split_passages(texts)
        if not sentences:
            chat.evidence = Evidence([], [])
            chat.abstain = chat.options.grounding.enabled
            return
        timeout = chat.deadline.left(self.settings.request_timeout_s)
        embedder = self.services.embedder
        embedding = asyncio.gather(
            embedder.embed([question], "query", timeout_s=timeout),
            embedder.embed([s.text for s in sentences], "passage", timeout_s=timeout),
        )
        reader = await self.reader.get()
        per_passage = self.settings.chat_extractive_max_sentences
        if reader is not None:
            found, (q, passages) = await asyncio.gather(
                asyncio.to_thread(reader.read_all, question, texts, per_passage), embedding
            )
        else:
            found = None
            chat.warnings.append(
                "no extractive reader is configured: answers are drawn from the sentence "
                "closest to the question (train one with `python -m trainers.reader`)"
            )
            q, passages = await embedding
        scores = _unit(np.asarray(passages.vectors)) @ _unit(np.asarray(q.vectors))[0]
        scores = scores.tolist()
        g = self.settings
        # How much each sentence bears on the question (its cosine, the question's words it
        # holds, the reader's margin where its span lies in it); the best is the answer.
        merits, best, margin = answer_choice(
            question,
            found or [],
            sentences,
            scores,
            similarity_weight=g.chat_reader_similarity_weight,
            overlap_weight=g.chat_reader_overlap_weight,
            margin_weight=g.chat_reader_margin_weight,
        )
        evidence = Evidence(sentences, merits, cosine=scores)
        if found is not None:
            others = further_spans(
                found, best, min_ratio=g.chat_extractive_min_ratio, limit=per_passage - 1
            )
            chat.reading = Reading(
                best.passage + 1, best, margin, tuple((a.passage + 1, a) for a in others)
            )
            # The answer's sentence already has the best merit; a reader span can run over
            # two of the split's sentences, and both then lead the evidence.
            for i, s in enumerate(sentences):
                if s.source == best.passage + 1 and s.start < best.end and best.start < s.end:
                    evidence.scores[i] = max(evidence.scores) + 1.0
        evidence.selected = select(
            evidence,
            max_sentences=g.chat_evidence_max_sentences,
            max_chars=g.chat_evidence_max_chars,
            min_score=g.chat_evidence_min_score,
        )
        chat.evidence = evidence


def _unit(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)


class EvidencePrompt(BuildPrompt):
    """The prompt stage: whole chunks (today's prompt) unless evidence was selected, then the
    sources that hold selected sentences, numbered [1]... in retrieval order, each with those
    sentences only, under the evidence system prompt. The sources with no selected sentence
    follow them in the citations (numbered after them), so every chunk is still returned."""

    async def run(self, chat: ChatState) -> None:
        if not Answerers.generates(chat):
            # Abstention or extraction: no prompt to count, the chunks are the sources.
            chat.prompt = Prompt([], list(chat.passages), 0, 0, 0)
            return
        if chat.evidence is None or not chat.options.grounding.evidence_selection:
            await super().run(chat)
            return
        chosen = chat.evidence.by_source()
        shown = [n for n in range(1, len(chat.passages) + 1) if n in chosen]
        rest = [n for n in range(1, len(chat.passages) + 1) if n not in chosen]
        blocks = [
            chat.passages[n - 1].with_text(evidence_text(chat.passages[n - 1].text, chosen[n]))
            for n in shown
        ]
        prompt = await self.fit(
            chat,
            blocks,
            self.settings.chat_evidence_system_prompt,
            "source(s) of selected evidence",
        )
        # Renumber: source k of the prompt is passage shown[k-1]; the evidence follows.
        order = shown[: len(prompt.sources)] + shown[len(prompt.sources) :] + rest
        chat.evidence.renumber({old: new for new, old in enumerate(order, start=1)})
        if chat.reading is not None:
            chat.reading = chat.reading.renumber(
                {old: new for new, old in enumerate(order, start=1)}
            )
        chat.passages = [chat.passages[n - 1] for n in order]
        chat.prompt = dataclasses.replace(prompt, sources=list(chat.passages))
