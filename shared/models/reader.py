"""The extractive reader: the answer span to a question in a passage, and the sentence that
holds it, both as exact character offsets into the passage.

A reader is a transformer fine-tuned for span extraction (`AutoModelForQuestionAnswering`:
start and end logits per token), exported to INT8 ONNX by `trainers/reader` and found in the
registry as `models/reader/<name>/<version>/` (`manifest.json`, `model_int8.onnx`, the
tokenizer files). It runs with onnxruntime and a fast tokenizer only, no torch, so the
gateway image can load it.

Sentences are `shared.text.sentence_spans`, the splitter the gateway's evidence selection,
the reader and the benchmarks share, so that "a sentence" means the same thing everywhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shared.text.sentences import sentence_spans, span_around

# -- the reader -------------------------------------------------------------------------------

ROLE = "reader"
INT8_FILE = "model_int8.onnx"
# (feeds) -> (start_logits, end_logits), each (windows, tokens): an ONNX session or, in the
# trainer, the PyTorch model, so both are measured through the same decoding.
RunFn = Callable[[dict[str, np.ndarray]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Answer:
    """The reader's best span in one passage. Offsets are characters of that passage:
    `passage_text[start:end] == text` and `passage_text[sentence_start:sentence_end] ==
    sentence` (the sentence or sentences that hold the span)."""

    passage: int
    start: int
    end: int
    text: str
    sentence_start: int
    sentence_end: int
    sentence: str
    score: float  # probability of this span in its window (start x end)
    no_answer: float  # probability the window holds no answer ([CLS] as start and end)

    @property
    def has_answer(self) -> bool:
        return bool(self.text) and self.score > self.no_answer


class Reader:
    """Question + passages -> the best answer span of each passage.

    Each passage is cut into windows of `max_length` tokens with the question in front
    ([CLS] question [SEP] window [SEP]), overlapping by `stride` tokens; every window of every
    passage goes through the model in one batch. The best span of a window maximises start +
    end logits over context tokens with end - start < `max_answer_tokens`; its probability
    (softmax over the window's context tokens and [CLS]) is compared with [CLS]'s.
    """

    def __init__(
        self,
        tokenizer: Any,
        run: RunFn,
        *,
        max_length: int = 384,
        stride: int = 64,
        max_answer_tokens: int = 64,
        max_question_tokens: int = 48,
        input_names: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids"),
    ) -> None:
        self.tokenizer = tokenizer  # a `tokenizers.Tokenizer`
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.run = run
        self.max_length = max_length
        self.stride = stride
        self.max_answer_tokens = max_answer_tokens
        self.max_question_tokens = max_question_tokens
        self.input_names = input_names
        vocab = tokenizer.get_vocab()
        cls, sep = ("[CLS]", "[SEP]") if "[CLS]" in vocab else ("<s>", "</s>")
        self.cls_id, self.sep_id = vocab[cls], vocab[sep]
        self.pad_id = vocab.get("[PAD]", vocab.get("<pad>", 0))

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, threads: int = 0, onnx_file: str = "", **options: Any
    ) -> Reader:
        """A reader from a model directory written by `python -m trainers.reader`."""
        from tokenizers import Tokenizer

        from shared.models import runtime

        path = Path(path)
        manifest = _read_json(path / "manifest.json")
        file = path / (onnx_file or manifest.get("file") or INT8_FILE)
        if not file.is_file():
            raise FileNotFoundError(
                f"{file} does not exist; train a reader with `python -m trainers.reader`"
            )
        if "max_length" in manifest:
            options.setdefault("max_length", int(manifest["max_length"]))
        session = runtime.session(file, threads)
        names = tuple(i.name for i in session.get_inputs())

        def run(feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
            start, end = session.run(None, {n: feeds[n] for n in names})[:2]
            return start, end

        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        return cls(tokenizer, run, input_names=names, **options)

    @classmethod
    def from_registry(
        cls, ref: str = "", *, root: str | os.PathLike[str] | None = None, **options: Any
    ) -> Reader:
        """`ref` is "name" or "name/version" under models/reader/; empty: the newest reader."""
        from shared.models import registry

        if ref:
            name, _, version = ref.partition("/")
            entry = registry.resolve(ROLE, name, version or registry.LATEST, root)
        else:
            found = registry.entries(ROLE, root=root)
            if not found:
                raise registry.RegistryError(
                    f"no reader in the registry at {registry.models_root(root)}; train one with "
                    "`python -m trainers.reader`"
                )
            entry = found[-1]
        return cls.load(entry.path, **options)

    # -- reading ----------------------------------------------------------------------------

    def _windows(self, q_ids: list[int], n_tokens: int) -> list[tuple[int, int]]:
        width = max(self.max_length - len(q_ids) - 3, 8)
        if n_tokens == 0:
            return []  # nothing to read: the passage gets the empty answer
        if n_tokens <= width:
            return [(0, n_tokens)]
        step = max(width - self.stride, 1)
        starts = [*range(0, n_tokens - width, step), n_tokens - width]
        return [(lo, lo + width) for lo in starts]

    def read(self, question: str, passages: list[str]) -> list[Answer]:
        """One answer per passage, in passage order (text "" when a passage has no tokens)."""
        return [found[0] for found in self.read_all(question, passages, 1)]

    def read_all(self, question: str, passages: list[str], per_passage: int) -> list[list[Answer]]:
        """Per passage (in order), its best spans in up to `per_passage` different sentences,
        best first: a question whose answer takes two sentences (how bees tell where food is:
        they dance, and the run's angle and length say where) gets both."""
        q_ids = self.tokenizer.encode(question, add_special_tokens=False).ids
        q_ids = q_ids[: self.max_question_tokens]
        encoded = [self.tokenizer.encode(p, add_special_tokens=False) for p in passages]
        rows: list[tuple[int, int, int]] = []  # (passage, lo, hi) token windows
        for i, enc in enumerate(encoded):
            rows += [(i, lo, hi) for lo, hi in self._windows(q_ids, len(enc.ids))]
        if not rows:
            return [[self._empty(i)] for i in range(len(passages))]
        width = max(len(q_ids) + 3 + hi - lo for _, lo, hi in rows)
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        head = [self.cls_id, *q_ids, self.sep_id]
        for r, (i, lo, hi) in enumerate(rows):
            seq = head + encoded[i].ids[lo:hi] + [self.sep_id]
            ids[r, : len(seq)] = seq
            mask[r, : len(seq)] = 1
            types[r, len(head) : len(seq)] = 1
        start_logits, end_logits = self.run(
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )
        found: dict[int, list[Answer]] = {}  # passage -> its windows' best spans
        sentences = {i: sentence_spans(passages[i]) for i, _, _ in rows}
        for r, (i, lo, hi) in enumerate(rows):
            spans = self._decode(
                passages[i],
                sentences[i],
                i,
                encoded[i].offsets,
                lo,
                hi,
                len(head),
                start_logits[r],
                end_logits[r],
                per_passage,
            )
            found.setdefault(i, []).extend(spans)
        # Windows overlap: a sentence keeps its best span.
        out = []
        for i in range(len(passages)):
            kept: list[Answer] = []
            for answer in sorted(found.get(i, []), key=_gain, reverse=True):
                if not any(_same_sentence(answer, x) for x in kept):
                    kept.append(answer)
            out.append(kept[:per_passage] or [self._empty(i)])
        return out

    def _decode(
        self,
        text: str,
        sentences: list[Any],
        passage: int,
        offsets: list[tuple[int, int]],
        lo: int,
        hi: int,
        first: int,
        start_logits: np.ndarray,
        end_logits: np.ndarray,
        k: int = 1,
    ) -> list[Answer]:
        """The window's best spans in up to `k` different sentences, best first."""
        n = hi - lo
        # Context tokens and [CLS] compete; question, [SEP] and padding do not.
        s = np.concatenate([start_logits[:1], start_logits[first : first + n]]).astype(np.float64)
        e = np.concatenate([end_logits[:1], end_logits[first : first + n]]).astype(np.float64)
        ps, pe = _softmax(s), _softmax(e)
        scores = s[1:, None] + e[None, 1:]
        band = np.triu(np.ones((n, n), dtype=bool)) & ~np.triu(
            np.ones((n, n), dtype=bool), self.max_answer_tokens
        )
        scores = np.where(band, scores, -np.inf).ravel()
        # The best span first; then, for k > 1, the next best in a sentence not yet taken
        # (the few hundred best spans are enough to find them).
        order = [int(np.argmax(scores))] if k == 1 else np.argsort(-scores)[: 50 * k].tolist()
        out: list[Answer] = []
        for flat in order:
            if not np.isfinite(scores[flat]):
                break
            a, b = divmod(flat, n)
            start, end = offsets[lo + a][0], offsets[lo + b][1]
            s_lo, s_hi = span_around(sentences, start, end)
            if any(s_lo < x.sentence_end and x.sentence_start < s_hi for x in out):
                continue  # a sentence already taken (or a span across it and another)
            out.append(
                Answer(
                    passage=passage,
                    start=start,
                    end=end,
                    text=text[start:end],
                    sentence_start=s_lo,
                    sentence_end=s_hi,
                    sentence=text[s_lo:s_hi],
                    score=float(ps[a + 1] * pe[b + 1]),
                    no_answer=float(ps[0] * pe[0]),
                )
            )
            if len(out) == k:
                break
        return out

    @staticmethod
    def _empty(passage: int) -> Answer:
        return Answer(passage, 0, 0, "", 0, 0, "", 0.0, 1.0)


def _gain(answer: Answer) -> float:
    return answer.score - answer.no_answer


def _same_sentence(a: Answer, b: Answer) -> bool:
    """Whether the two answers' sentences overlap."""
    return a.sentence_start < b.sentence_end and b.sentence_start < a.sentence_end


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
