"""The COVID-QA training articles kept out of the reader's training, for choosing the
gateway's thresholds on questions the reader never saw (`bench/answers.py --split dev`)."""

from __future__ import annotations

import random
from collections.abc import Iterable

DEV_ARTICLES = 8
DEV_SEED = 0


def dev_articles(
    article_ids: Iterable[str], k: int = DEV_ARTICLES, seed: int = DEV_SEED
) -> set[str]:
    ids = sorted(set(article_ids))
    return set(random.Random(seed).sample(ids, min(k, len(ids))))
