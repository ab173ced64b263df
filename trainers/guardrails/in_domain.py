"""Benign in-domain questions: the queries of a BEIR directory, as negatives for the
prompt-injection classifier.

A classifier trained only on the prompt-injection set learns what its benign prompts look
like (everyday questions and requests) and flags much else: the first classifier trained here
blocked 70% of SciFact's claims ("4-PBA treatment decreases endoplasmic reticulum stress…"),
the very questions the service is there to answer. `--in-domain DIR` adds the queries of
`DIR/qrels/train.tsv` to training as benign rows and holds the threshold to a false-positive
rate on them too; the queries of `DIR/qrels/test.tsv` are only measured, never trained on or
used to choose anything (an id in both files counts as a test query).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

TRAIN_SPLIT, TEST_SPLIT = "train", "test"


def split_ids(root: Path, split: str) -> list[str]:
    """Query ids of qrels/<split>.tsv, in file order, each once (a header line is skipped)."""
    path = root / "qrels" / f"{split}.tsv"
    if not path.is_file():
        raise SystemExit(f"{root}: no qrels/{split}.tsv; --in-domain needs a BEIR directory")
    ids: dict[str, None] = {}
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f):
            parts = line.rstrip("\n").split("\t")
            if not parts[0] or (number == 0 and not parts[-1].lstrip("-").isdigit()):
                continue
            ids[parts[0]] = None
    return list(ids)


@dataclass
class InDomain:
    root: Path
    train: list[str]  # benign texts to train and calibrate on
    test: list[str]  # benign texts only measured
    sha256: str

    @classmethod
    def load(cls, root: Path) -> InDomain:
        queries_file = root / "queries.jsonl"
        if not queries_file.is_file():
            raise SystemExit(f"{root}: no queries.jsonl; --in-domain needs a BEIR directory")
        queries: dict[str, str] = {}
        with queries_file.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    queries[str(row["_id"])] = str(row["text"])
        test_ids = split_ids(root, TEST_SPLIT)
        held = set(test_ids)
        train_ids = [i for i in split_ids(root, TRAIN_SPLIT) if i not in held]
        train = [queries[i] for i in train_ids if i in queries and queries[i].strip()]
        test = [queries[i] for i in test_ids if i in queries and queries[i].strip()]
        if not train:
            raise SystemExit(f"{root}: qrels/{TRAIN_SPLIT}.tsv names no query of queries.jsonl")
        digest = hashlib.sha256()
        for name in ("queries.jsonl", f"qrels/{TRAIN_SPLIT}.tsv", f"qrels/{TEST_SPLIT}.tsv"):
            digest.update(name.encode())
            digest.update((root / name).read_bytes())
        return cls(root, train, test, digest.hexdigest())
