"""bench/squad_as_qa.py: a SQuAD-format file in the QA layout bench/answers.py reads, its test
split exactly the articles the reader's trainer holds out."""

from __future__ import annotations

import json
from pathlib import Path

from bench.qa.data import load_qa
from bench.squad_as_qa import convert
from trainers.reader.examples import xquad


def squad(path: Path, articles: int) -> Path:
    data = []
    for a in range(articles):
        context = f"Article {a} says that the river number {a} is {a + 10} kilometres long."
        answer = f"{a + 10} kilometres"
        qa = {"text": answer, "answer_start": context.index(answer)}
        data.append(
            {
                "title": f"Article {a}",
                "paragraphs": [
                    {"context": "An opening paragraph.", "qas": []},
                    {
                        "context": context,
                        "qas": [
                            {
                                "id": f"q{a}",
                                "question": f"How long is river {a}?",
                                "answers": [qa],
                            }
                        ],
                    },
                ],
            }
        )
    path.write_text(json.dumps({"data": data}))
    return path


def test_held_out_articles_are_the_trainers_and_offsets_hold(tmp_path: Path) -> None:
    source = squad(tmp_path / "squad.json", 12)
    articles, test, train = convert(source, tmp_path / "qa", eval_articles=3, seed=0)
    assert (articles, test, train) == (12, 3, 9)
    docs, questions = load_qa(tmp_path / "qa", "test")
    _, held = xquad(source, 3, 0)
    assert {q["id"] for q in questions} == {e.qid for e in held}
    for q in questions:
        text = docs[q["document_id"]]["text"]
        start = q["answer_start"]
        assert text[start : start + len(q["answers"][0])] == q["answers"][0]
    _, rest = load_qa(tmp_path / "qa", "train")
    assert not {q["document_id"] for q in rest} & {q["document_id"] for q in questions}
