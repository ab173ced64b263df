"""A SQuAD-format file (XQuAD English in ../shared/data) as a QA set in the covidqa layout
that bench/answers.py and bench/reader_replay.py read: a second source, of another kind of
text, to check the answer step on.

    python bench/squad_as_qa.py --out bench/results/xquad-qa
    python bench/answers.py --data bench/results/xquad-qa --configs baseline,default

Each article is one document (its title, then its paragraphs). `questions/test.jsonl` holds
the questions of the articles `python -m trainers.reader` holds out of training (the same
`--eval-articles` and `--seed`: 8 and 0 by default), so a reader trained by the default
recipe never saw them; `questions/train.jsonl` holds the rest.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import SHARED_DATA


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def convert(source: Path, out: Path, eval_articles: int, seed: int) -> tuple[int, int, int]:
    data = json.loads(source.read_text(encoding="utf-8"))["data"]
    titles = sorted(a["title"] for a in data)
    # The split of trainers/reader/examples.py's `xquad`: the same articles held out.
    held = set(random.Random(seed).sample(titles, min(eval_articles, len(titles))))
    (out / "questions").mkdir(parents=True, exist_ok=True)
    counts = {"test": 0, "train": 0}
    with (
        (out / "documents.jsonl").open("w") as docs,
        (out / "questions" / "test.jsonl").open("w") as test,
        (out / "questions" / "train.jsonl").open("w") as train,
    ):
        for article in data:
            doc_id = f"squad-{slug(article['title'])}"
            text = article["title"]
            for paragraph in article["paragraphs"]:
                offset = len(text) + 2
                text += "\n\n" + paragraph["context"]
                for qa in paragraph["qas"]:
                    first = qa["answers"][0]
                    row = {
                        "id": qa["id"],
                        "question": qa["question"],
                        "answers": list(dict.fromkeys(a["text"] for a in qa["answers"])),
                        "document_id": doc_id,
                        "answer_start": offset + first["answer_start"],
                    }
                    split = "test" if article["title"] in held else "train"
                    (test if split == "test" else train).write(json.dumps(row) + "\n")
                    counts[split] += 1
            docs.write(json.dumps({"id": doc_id, "title": article["title"], "text": text}) + "\n")
    return len(data), counts["test"], counts["train"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=SHARED_DATA / "xquad_en" / "xquad.en.json")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--eval-articles", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not args.source.exists():
        print(f"{args.source} does not exist; pass --source (a SQuAD-format JSON file)")
        return 2
    articles, test, train = convert(args.source, args.out, args.eval_articles, args.seed)
    print(f"{articles} documents, {test} test and {train} train questions in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
