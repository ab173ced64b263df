"""The QA set in the COVID-QA layout: articles, questions, and the answerable / unanswerable
samples."""

from __future__ import annotations

import json
import random
from pathlib import Path

from trainers.reader.splits import dev_articles


def load_qa(root: Path, split: str = "test") -> tuple[dict[str, dict], list[dict]]:
    """The articles and the questions of one split; `dev` is the train questions of the
    articles `python -m trainers.reader --dev-articles 8` leaves out (trainers/reader/
    splits.py): the split to choose thresholds on for a reader trained so (the default recipe
    trains on them)."""
    docs = {}
    with (root / "documents.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            docs[row["id"]] = row
    with (root / "questions" / f"{'train' if split == 'dev' else split}.jsonl").open() as f:
        questions = [json.loads(line) for line in f]
    if split == "dev":
        dev = dev_articles(q["document_id"] for q in questions)
        questions = [q for q in questions if q["document_id"] in dev]
    return docs, questions


def split_questions(
    questions: list[dict], n: int, holdout: int, seed: int
) -> tuple[list[dict], list[dict], set[str]]:
    """(answerable sample, unanswerable sample, held-out article ids). The held-out articles
    are drawn from the test articles; the answerable questions come from every test article
    (they are asked against the full collection), the unanswerable ones from the held-out
    articles only, at most as many as the answerable sample."""
    rng = random.Random(seed)
    articles = sorted({q["document_id"] for q in questions})
    held = set(rng.sample(articles, min(holdout, len(articles))))
    answerable = list(questions)
    if n and n < len(answerable):
        answerable = random.Random(seed).sample(answerable, n)
    unanswerable = [q for q in questions if q["document_id"] in held]
    if n and n < len(unanswerable):
        unanswerable = random.Random(seed + 1).sample(unanswerable, n)
    return answerable, unanswerable, held
