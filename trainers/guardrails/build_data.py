"""Builds the training data that ships in trainers/guardrails/training_data/ from ../shared/data.

    python -m trainers.guardrails.build_data                 # ../shared/data -> data/
    python -m trainers.guardrails.build_data --check         # the shipped files are current

The guardrail classifiers are trained on first start, on a machine that has no
../shared/data: what they learn from must be in the repository. This copies the *train*
splits only (test splits stay out, so the figures measured on them stay honest) of the sets
whose licences allow redistribution in a product, and drops the rows of sources that do not
(trainers/guardrails/training_data/README.md lists each source and its licence):

* AG News (`ag_news_test`): "for research and other non-commercial use", no licence;
* MyFixit (`myfixit_repair_manuals`): CC BY-NC-SA 3.0;
* SciFact (CC BY-NC 2.0) is not copied at all (`--in-domain` / `--benign-docs` read it
  where it is present).

Beside the train splits, `documents_mixed` gets a `scientific` domain: passages of the
COVID-QA articles that only train questions ask about and that say they are CC BY (the
test articles stay out), cut as the gateway cuts documents. No other shipped domain is
scientific prose, and the document head dropped 5 of 200 SciFact test abstracts without one.

Same layout and fields as ../shared/data (`<set>/train.jsonl.gz`), so the trainer reads
either directory the same way. gzip with a fixed mtime: the same input gives the same bytes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from trainers import shipped
from trainers.shipped import gzip_rows, read_rows

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"
SHIPPED = Path(__file__).resolve().parent / "training_data"
SETS = (
    "prompt_injections",
    "injections_extra",
    "benign_instructions",
    "content_safety",
    "documents_mixed",
)
# Sources whose licence forbids commercial use: never in anything shipped.
NON_COMMERCIAL = frozenset({"ag_news_test", "myfixit_repair_manuals"})


def reading_comprehension(source: Path) -> list[dict]:
    """Questions people ask about documents and the answers found in them, benign (label 0):
    COVID-QA's train questions and answers (Apache-2.0; the test questions ask about other
    articles and stay out) and XQuAD English's questions (CC BY-SA 4.0). Without them the
    content-safety head refused one COVID-QA test question in twenty ("Why is additional
    research needed?" as other hazards) and some answers quoted from virology papers."""
    covidqa = read_rows(source / "covidqa" / "questions" / "train.jsonl")
    rows = [
        {"text": q["question"], "label": 0, "source": "covidqa_train_question"} for q in covidqa
    ]
    rows += [
        {"text": q["answers"][0], "label": 0, "source": "covidqa_train_answer"}
        for q in covidqa
        if len(q["answers"][0].split()) >= 5  # sentence-like answers, as the gateway gives them
    ]
    xquad = json.loads((source / "xquad_en" / "xquad.en.json").read_text(encoding="utf-8"))
    rows += [
        {"text": qa["question"], "label": 0, "source": "xquad_en_question"}
        for article in xquad["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]
    seen: set[str] = set()
    return [r for r in rows if not (r["text"] in seen or seen.add(r["text"]))]  # type: ignore[func-returns-value]


# Passages as the gateway's chunks are (256 embedder tokens, about 180 words), within the
# 200-1,500 characters of documents_mixed's passages.
PASSAGE_WORDS = 180
PASSAGE_CHARS = (200, 1500)
SCIENTIFIC_PASSAGES = 900
# The articles' own licence line: five train articles (a JAMA viewpoint, CDC pages, a
# preprint, an Imperial College report) carry none and stay out.
CC_BY = re.compile(r"^License:\s*cc-by\s*$", re.MULTILINE)


def scientific_passages(source: Path) -> list[dict]:
    """Benign document rows (domain `scientific`) from the COVID-QA train articles."""
    import random

    from shared.chunking import Chunker

    asked = {q["document_id"] for q in read_rows(source / "covidqa" / "questions" / "train.jsonl")}
    tested = {q["document_id"] for q in read_rows(source / "covidqa" / "questions" / "test.jsonl")}
    chunker = Chunker(chunk_size=PASSAGE_WORDS, chunk_overlap=0)
    texts = [
        piece.text
        for article in read_rows(source / "covidqa" / "documents.jsonl")
        if article["id"] in asked - tested and CC_BY.search(article["text"][:3000])
        for piece in chunker.chunk(article["text"])
    ]
    low, high = PASSAGE_CHARS
    texts = [t for t in texts if low <= len(t) <= high]
    texts = random.Random(0).sample(texts, min(SCIENTIFIC_PASSAGES, len(texts)))
    return [
        {"text": t, "domain": "scientific", "source": "covidqa_train_article", "label": 0}
        for t in texts
    ]


def build(source: Path) -> dict[str, tuple[bytes, dict]]:
    """{relative path: (file bytes, stats)} of the shipped files."""
    out: dict[str, tuple[bytes, dict]] = {}
    for name in SETS:
        rows = read_rows(source / name / "train.jsonl")
        kept = [r for r in rows if r.get("source") not in NON_COMMERCIAL]
        stats = {"rows": len(kept), "dropped_non_commercial": len(rows) - len(kept)}
        if name == "documents_mixed":
            kept += scientific_passages(source)
            stats["scientific"] = len(kept) - stats["rows"]
            stats["rows"] = len(kept)
        out[f"{name}/train.jsonl.gz"] = (gzip_rows(kept), stats)
    rows = reading_comprehension(source)
    out["reading_comprehension/train.jsonl.gz"] = (gzip_rows(rows), {"rows": len(rows)})
    return out


def main(argv: list[str] | None = None) -> int:
    return shipped.main(
        "python -m trainers.guardrails.build_data", __doc__, build, SHARED_DATA, SHIPPED, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
