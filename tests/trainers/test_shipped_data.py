"""The training data shipped in the repository (what `ragrail up` trains the guard model and
the reader on, on a machine without ../shared/data) is what the build scripts make of
../shared/data today, holds train splits only, and reads back as the trainers read it."""

from __future__ import annotations

import pytest

from trainers.guardrails import build_data as guard_data
from trainers.reader import build_data as reader_data
from trainers.reader.examples import SHIPPED, covidqa, xquad
from trainers.shipped import read_rows

SHARED = guard_data.SHARED_DATA


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is not here")
@pytest.mark.parametrize("module", [guard_data, reader_data], ids=["guardrails", "reader"])
def test_shipped_files_are_current(module) -> None:  # type: ignore[no-untyped-def]
    assert module.main(["--check"]) == 0, f"run python -m {module.__name__}"


def test_shipped_reader_data_holds_no_test_article() -> None:
    train = covidqa(SHIPPED / "covidqa", "train")
    assert len(train) > 900 and {e.source for e in train} == {"covidqa"}
    documents = read_rows(SHIPPED / "covidqa" / "documents.jsonl.gz")
    asked = {q["document_id"] for q in read_rows(SHIPPED / "covidqa/questions/train.jsonl.gz")}
    assert {d["id"] for d in documents} == asked
    assert not (SHIPPED / "covidqa" / "questions" / "test.jsonl.gz").exists()
    fit, held = xquad(SHIPPED / "xquad_en" / "xquad.en.json", 8, 0)
    assert fit and held and not {e.context for e in fit} & {e.context for e in held}
    if SHARED.is_dir():
        tests = read_rows(SHARED / "covidqa" / "questions" / "test.jsonl")
        assert not {q["document_id"] for q in tests} & asked


def test_shipped_scientific_passages_are_from_train_articles_only() -> None:
    """The guard's `scientific` document domain: COVID-QA train articles, never a test one."""
    rows = read_rows(guard_data.SHIPPED / "documents_mixed" / "train.jsonl.gz")
    passages = [r["text"] for r in rows if r["domain"] == "scientific"]
    assert len(passages) >= 500
    assert {r["source"] for r in rows if r["domain"] == "scientific"} == {"covidqa_train_article"}
    if SHARED.is_dir():
        tested = {q["document_id"] for q in read_rows(SHARED / "covidqa/questions/test.jsonl")}
        articles = read_rows(SHARED / "covidqa" / "documents.jsonl")
        texts = [a["text"] for a in articles if a["id"] in tested]
        assert not [p for p in passages if any(p in t for t in texts)]
        train = [a["text"] for a in articles if a["id"] not in tested]
        assert all(any(p in t for t in train) for p in passages[:50])
