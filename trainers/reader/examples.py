"""The reader's data: COVID-QA and XQuAD questions as Examples, each pointing at its answer in
its context, split by article."""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from trainers.reader.splits import dev_articles
from trainers.shipped import opener

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"
# The training data in the repository (build_data.py): COVID-QA train, XQuAD English.
SHIPPED = Path(__file__).resolve().parent / "training_data"


@dataclass(frozen=True)
class Example:
    """A question about a context with its answer at [start, end) of the context (characters);
    start -1: the context does not hold the answer."""

    qid: str
    question: str
    context: str
    start: int
    end: int
    answers: tuple[str, ...]
    source: str  # covidqa or xquad
    document: str = ""  # the article's id (COVID-QA) or title (XQuAD)


def sha256_of(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def data_file(path: Path) -> Path:
    """`path`, or its gzip-compressed copy (`<path>.gz`, as shipped) when only that exists."""
    packed = path.with_name(path.name + ".gz")
    return packed if not path.exists() and packed.exists() else path


def covidqa(root: Path, split: str) -> list[Example]:
    """COVID-QA questions of one split, each with its whole article as the context."""
    docs = {}
    with opener(data_file(root / "documents.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            docs[row["id"]] = row["text"]
    out = []
    with opener(data_file(root / "questions" / f"{split}.jsonl")) as f:
        for line in f:
            q = json.loads(line)
            text = docs[q["document_id"]]
            answer = q["answers"][0]
            start = q["answer_start"]
            if text[start : start + len(answer)] != answer:  # trust the text, not the offset
                start = text.find(answer)
                if start < 0:
                    continue
            out.append(
                Example(
                    q["id"],
                    q["question"],
                    text,
                    start,
                    start + len(answer),
                    tuple(q["answers"]),
                    "covidqa",
                    q["document_id"],
                )
            )
    return out


def has_test_split(root: Path | None) -> bool:
    return root is not None and data_file(root / "questions" / "test.jsonl").is_file()


def covidqa_test_root(args: argparse.Namespace) -> Path | None:
    """Where the COVID-QA test questions come from: --covidqa-test, else the training
    directory when it has a test split (a fixture), else ../shared/data/covidqa when present
    (the shipped data holds no test split), else none."""
    if args.covidqa_test is not None:
        return Path(args.covidqa_test) if args.covidqa_test else None
    for root in (args.covidqa, SHARED_DATA / "covidqa"):
        if has_test_split(root):
            return root
    return None


def xquad(path: Path, eval_articles: int, seed: int) -> tuple[list[Example], list[Example]]:
    """(train, held-out) XQuAD examples, split by article."""
    with opener(data_file(path)) as f:
        data = json.load(f)["data"]
    titles = sorted(a["title"] for a in data)
    held = set(random.Random(seed).sample(titles, min(eval_articles, len(titles))))
    train, held_out = [], []
    for article in data:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            for qa in paragraph["qas"]:
                first = qa["answers"][0]
                start = first["answer_start"]
                if context[start : start + len(first["text"])] != first["text"]:
                    continue
                example = Example(
                    qa["id"],
                    qa["question"],
                    context,
                    start,
                    start + len(first["text"]),
                    tuple(a["text"] for a in qa["answers"]),
                    "xquad",
                    article["title"],
                )
                (held_out if article["title"] in held else train).append(example)
    return train, held_out


@dataclass
class Data:
    """What a run learns from and is measured on, and where it came from (for the manifest)."""

    train: list[Example]
    eval_sets: dict[str, list[Example]]  # covidqa_test, covidqa_dev, xquad_heldout
    hashed: list[Path]
    sources: list[str]
    dev: set[str]  # COVID-QA train articles kept out for the dev split
    test_root: Path | None


def load(args: argparse.Namespace, rng: random.Random) -> Data:
    """The training and evaluation examples the arguments name; --max-examples subsamples
    with `rng`."""
    train_ex: list[Example] = []
    eval_sets: dict[str, list[Example]] = {}
    hashed: list[Path] = []
    sources = []
    dev: set[str] = set()
    if args.covidqa:
        covid_train = covidqa(args.covidqa, "train")
        dev = dev_articles((ex.document for ex in covid_train), args.dev_articles)
        train_ex += [ex for ex in covid_train if ex.document not in dev]
        if dev:
            eval_sets["covidqa_dev"] = [ex for ex in covid_train if ex.document in dev]
        hashed += [
            data_file(args.covidqa / "documents.jsonl"),
            data_file(args.covidqa / "questions" / "train.jsonl"),
        ]
        sources.append(f"COVID-QA train less {len(dev)} dev articles")
    test_root = covidqa_test_root(args)
    if test_root is not None:
        eval_sets["covidqa_test"] = covidqa(test_root, "test")
        hashed.append(data_file(test_root / "questions" / "test.jsonl"))
    else:
        print("no COVID-QA test split here (../shared/data/covidqa): not evaluated on it")
    if args.xquad:
        xq_train, xq_eval = xquad(args.xquad, args.xquad_eval, args.seed)
        train_ex += xq_train
        eval_sets["xquad_heldout"] = xq_eval
        hashed.append(data_file(args.xquad))
        sources.append(f"XQuAD English less {args.xquad_eval} held-out articles")
    if not train_ex:
        raise SystemExit("no training data: pass --covidqa and/or --xquad")
    if args.max_examples:
        train_ex = rng.sample(train_ex, min(args.max_examples, len(train_ex)))
        eval_sets = {k: v[: args.max_examples] for k, v in eval_sets.items()}
    return Data(train_ex, eval_sets, hashed, sources, dev, test_root)
