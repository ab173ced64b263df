"""Measuring a reader (PyTorch before export, the INT8 runtime after): span and sentence F1/EM
on windows that hold the answer, and the share it declines on windows that do not."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from shared.text.qa_metrics import best, exact, token_f1
from trainers.reader.examples import Example
from trainers.reader.features import Featurizer
from trainers.reader.other_documents import other_document_chunks


def evaluate(
    reader: Any,
    examples: list[Example],
    negatives: dict[str, list[tuple[str, str]]],
    chars: int,
) -> dict:
    """Span and sentence F1/EM with a window that holds the answer, and how often the reader
    finds an answer there; per kind of window without the answer (`negatives`: its own
    article elsewhere, other articles' closest chunks), the share it declines; milliseconds
    per question."""
    f1, em, sentence_f1, found = [], [], [], []
    started = time.perf_counter()
    for ex, window in examples_windows(examples, chars):
        answer = reader.read(ex.question, [window])[0]
        f1.append(best(token_f1, answer.text, list(ex.answers)))
        em.append(best(exact, answer.text, list(ex.answers)))
        sentence_f1.append(best(token_f1, answer.sentence, list(ex.answers)))
        found.append(answer.has_answer)
    ms = (time.perf_counter() - started) * 1000 / max(len(examples), 1)
    out = {
        "questions": len(f1),
        "f1": round(float(np.mean(f1)), 4) if f1 else None,
        "em": round(float(np.mean(em)), 4) if em else None,
        "sentence_f1": round(float(np.mean(sentence_f1)), 4) if sentence_f1 else None,
        "answer_found_rate": round(float(np.mean(found)), 4) if found else None,
        "ms_per_question": round(ms, 2),
    }
    for kind, pairs in negatives.items():
        if pairs:
            answered = [reader.read(q, [window])[0].has_answer for q, window in pairs]
            out[f"{kind}_windows"] = len(pairs)
            out[f"{kind}_declined"] = round(1 - float(np.mean(answered)), 4)
    return out


def examples_windows(examples: list[Example], width: int) -> list[tuple[Example, str]]:
    """Each example with a character window of its context that holds the answer, about a
    chunk long (`width` characters), centred on the answer."""
    out = []
    for ex in examples:
        lo = max(0, (ex.start + ex.end) // 2 - width // 2)
        hi = min(len(ex.context), lo + width)
        lo = max(0, min(lo, hi - width))
        lo = ex.context.rfind(" ", 0, lo) + 1 if lo else 0
        hi = ex.context.find(" ", hi) if hi < len(ex.context) else hi
        hi = len(ex.context) if hi < 0 else hi
        if lo <= ex.start and ex.end <= hi:
            out.append((ex, ex.context[lo:hi]))
    return out


def negative_windows(examples: list[Example], n: int, chars: int, seed: int) -> list:
    """(question, text) pairs from the question's own article away from its answer."""
    rng = random.Random(seed)
    out = []
    for ex in rng.sample(examples, min(n, len(examples))):
        spots = [
            lo
            for lo in range(0, max(len(ex.context) - chars, 0), chars)
            if lo + chars <= ex.start - 1 or lo > ex.end
        ]
        if spots:
            lo = rng.choice(spots)
            out.append((ex.question, ex.context[lo : lo + chars]))
    return out


def torch_reader(model: Any, tokenizer_file: Path, max_length: int) -> Any:
    """The runtime's decoding on the PyTorch model, to measure before export."""
    import torch
    from tokenizers import Tokenizer

    from shared.models.reader import Reader

    def run(feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            o = model(**{k: torch.from_numpy(v) for k, v in feeds.items()})
        return o.start_logits.numpy(), o.end_logits.numpy()

    return Reader(Tokenizer.from_file(str(tokenizer_file)), run, max_length=max_length)


def eval_negatives(
    eval_sets: dict[str, list[Example]], featurizer: Featurizer, count: int, chars: int, seed: int
) -> dict[str, dict[str, list[tuple[str, str]]]]:
    """Windows without the answer, per set: the closest chunk of another of the set's
    articles (what abstention faces), and for COVID-QA elsewhere in the question's own
    article."""
    negatives: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for name, examples in eval_sets.items():
        sample = random.Random(seed).sample(examples, min(count, len(examples)))
        others = other_document_chunks(sample, featurizer, 1, seed)
        pairs = zip(sample, others, strict=True)
        negatives[name] = {"other_articles": [(ex.question, c[0]) for ex, c in pairs if c]}
        if name.startswith("covidqa"):
            negatives[name]["own_article"] = negative_windows(examples, count, chars, seed)
    return negatives
