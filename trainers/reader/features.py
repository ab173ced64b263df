"""Training windows: a question with one window of its context's tokens, as the runtime builds
them, labelled with the answer's token span or [CLS] (no answer); batches and their tensors."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

from trainers.reader.examples import Example


@dataclass(frozen=True)
class Feature:
    input_ids: list[int]
    token_type_ids: list[int]
    start: int  # token position in the input; 0 ([CLS]): no answer in this window
    end: int


class Featurizer:
    """Question + one window of the context's tokens, as the runtime builds them."""

    def __init__(self, tokenizer: Any, max_length: int, max_question_tokens: int) -> None:
        self.tok = tokenizer
        self.max_length = max_length
        self.max_question_tokens = max_question_tokens
        self._contexts: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}

    def context_tokens(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        key = hashlib.sha1(text.encode()).hexdigest()
        if key not in self._contexts:
            enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=True)
            self._contexts[key] = (enc["input_ids"], enc["offset_mapping"])
        return self._contexts[key]

    def question_tokens(self, question: str) -> list[int]:
        ids = self.tok(question, add_special_tokens=False)["input_ids"]
        return ids[: self.max_question_tokens]

    def window(self, q_ids: list[int]) -> int:
        return self.max_length - len(q_ids) - 3

    def answer_tokens(self, ex: Example) -> tuple[int, int] | None:
        _, offsets = self.context_tokens(ex.context)
        first = next((i for i, (s, e) in enumerate(offsets) if e > ex.start), None)
        last = next((i for i in range(len(offsets) - 1, -1, -1) if offsets[i][0] < ex.end), None)
        if first is None or last is None or last < first:
            return None
        return first, last

    def feature(self, q_ids: list[int], ctx_ids: list[int], lo: int, hi: int, span) -> Feature:
        cls, sep = self.tok.cls_token_id, self.tok.sep_token_id
        ids = [cls, *q_ids, sep, *ctx_ids[lo:hi], sep]
        types = [0] * (len(q_ids) + 2) + [1] * (hi - lo + 1)
        if span is None:
            return Feature(ids, types, 0, 0)
        offset = len(q_ids) + 2 - lo
        return Feature(ids, types, span[0] + offset, span[1] + offset)

    def positive(self, ex: Example, rng: random.Random | None) -> Feature | None:
        """The window holding the answer; a random place in it (training) or centred (eval)."""
        ids, _ = self.context_tokens(ex.context)
        q_ids = self.question_tokens(ex.question)
        width = self.window(q_ids)
        span = self.answer_tokens(ex)
        if span is None or span[1] - span[0] + 1 > width:
            return None
        lowest, highest = max(0, span[1] - width + 1), min(span[0], max(len(ids) - width, 0))
        if rng is None:
            lo = max(0, min((span[0] + span[1]) // 2 - width // 2, max(len(ids) - width, 0)))
            lo = min(max(lo, lowest), highest)
        else:
            lo = rng.randint(lowest, highest) if highest >= lowest else lowest
        return self.feature(q_ids, ids, lo, min(lo + width, len(ids)), span)

    def unanswered(self, question: str, text: str, rng: random.Random) -> Feature:
        """A window of another document's `text` (one chunk), labelled "no answer"."""
        ids, _ = self.context_tokens(text)
        q_ids = self.question_tokens(question)
        width = self.window(q_ids)
        lo = rng.randint(0, max(len(ids) - width, 0))
        return self.feature(q_ids, ids, lo, min(lo + width, len(ids)), None)

    def negatives(self, ex: Example, n: int, rng: random.Random) -> list[Feature]:
        """Up to n windows of the context that do not overlap the answer."""
        ids, _ = self.context_tokens(ex.context)
        q_ids = self.question_tokens(ex.question)
        width = self.window(q_ids)
        span = self.answer_tokens(ex)
        if span is None or len(ids) <= width:
            return []
        starts = [
            lo
            for lo in range(0, len(ids) - width + 1, max(width // 2, 1))
            if lo + width <= span[0] or lo > span[1]
        ]
        return [
            self.feature(q_ids, ids, lo, lo + width, None)
            for lo in rng.sample(starts, min(n, len(starts)))
        ]


def batches(
    features: list[Feature], batch_size: int, rng: random.Random, by_length: bool = False
) -> list[list[Feature]]:
    """Shuffled batches; `by_length`: of windows of similar length (jittered so batches differ
    from epoch to epoch), in random order, so little of each batch is padding."""
    order = list(range(len(features)))
    rng.shuffle(order)
    if by_length:
        order.sort(key=lambda i: len(features[i].input_ids) + rng.uniform(0, 8))
    out = [
        [features[i] for i in order[s : s + batch_size]] for s in range(0, len(order), batch_size)
    ]
    if by_length:
        rng.shuffle(out)
    return out


def tensors(batch: list[Feature], pad_id: int) -> dict[str, Any]:
    import torch

    width = max(len(f.input_ids) for f in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    types = torch.zeros((len(batch), width), dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, f in enumerate(batch):
        ids[i, : len(f.input_ids)] = torch.tensor(f.input_ids)
        types[i, : len(f.token_type_ids)] = torch.tensor(f.token_type_ids)
        mask[i, : len(f.input_ids)] = 1
    return {
        "input_ids": ids,
        "token_type_ids": types,
        "attention_mask": mask,
        "start_positions": torch.tensor([f.start for f in batch]),
        "end_positions": torch.tensor([f.end for f in batch]),
    }
