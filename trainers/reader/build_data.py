"""Builds the training data that ships in trainers/reader/training_data/ from ../shared/data.

    python -m trainers.reader.build_data             # ../shared/data -> training_data/
    python -m trainers.reader.build_data --check     # the shipped files are current

`ragrail up` trains the reader on first start, on a machine that has no ../shared/data, so
what it learns from is in the repository (trainers/reader/training_data/README.md):

* COVID-QA (Apache-2.0): the *train* questions and only the articles they ask about; the
  test questions and their 20 articles stay out, so the figures measured on them stay honest;
* XQuAD English (CC BY-SA 4.0), whole: the trainer holds its last articles out itself.

Same layout as ../shared/data, gzip-compressed (`covidqa/documents.jsonl.gz`,
`covidqa/questions/train.jsonl.gz`, `xquad_en/xquad.en.json.gz`), so the trainer reads
either directory the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

from trainers import shipped
from trainers.shipped import gzip_rows, gzip_text, read_rows

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"
SHIPPED = Path(__file__).resolve().parent / "training_data"


def build(source: Path) -> dict[str, tuple[bytes, dict]]:
    """{relative path: (file bytes, stats)} of the shipped files."""
    questions = read_rows(source / "covidqa" / "questions" / "train.jsonl")
    asked = {q["document_id"] for q in questions}
    documents = [d for d in read_rows(source / "covidqa" / "documents.jsonl") if d["id"] in asked]
    xquad = (source / "xquad_en" / "xquad.en.json").read_text(encoding="utf-8")
    articles = len(json.loads(xquad)["data"])
    return {
        "covidqa/documents.jsonl.gz": (gzip_rows(documents), {"articles": len(documents)}),
        "covidqa/questions/train.jsonl.gz": (gzip_rows(questions), {"questions": len(questions)}),
        "xquad_en/xquad.en.json.gz": (gzip_text(xquad), {"articles": articles}),
    }


def main(argv: list[str] | None = None) -> int:
    return shipped.main(
        "python -m trainers.reader.build_data", __doc__, build, SHARED_DATA, SHIPPED, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
