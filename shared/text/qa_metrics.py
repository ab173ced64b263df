"""Answer scoring by SQuAD v1.1 rules: normalisation, token F1, exact match, containment.

The reader's evaluation, bench/answers.py and bench/reader_replay.py score with these, so
their figures compare. The generator's grounding figures (bench/trainers.py) are token F1
over plain words instead (`token_f1(..., tokens=words)`: articles and punctuation inside
words kept), as they were first published."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable

_PUNCTUATION = set(string.punctuation)


def normalize(text: str) -> str:
    """Lowercase, no punctuation, no articles, single spaces (the official script's rules)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def squad_tokens(text: str) -> list[str]:
    return normalize(text).split()


def token_f1(
    prediction: str, gold: str, tokens: Callable[[str], list[str]] = squad_tokens
) -> float:
    """Token-overlap F1 of two texts, tokenised by `tokens` (SQuAD's normalisation unless
    told); 0.0 when they share no token (an empty side included)."""
    pred, ref = tokens(prediction), tokens(gold)
    same = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact(prediction: str, gold: str) -> float:
    return float(normalize(prediction) == normalize(gold))


def contained(prediction: str, gold: str) -> float:
    """1.0 when the normalised gold answer occurs in the normalised prediction."""
    g = normalize(gold)
    return float(bool(g) and g in normalize(prediction))


def best(metric: Callable[[str, str], float], prediction: str, golds: list[str]) -> float:
    """The metric against the closest of several gold answers."""
    return max(metric(prediction, g) for g in golds)
