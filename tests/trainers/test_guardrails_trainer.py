"""trainers.guardrails: the threshold rule and folds, then tiny runs of both recipes on
tests/fixtures/injections (the files written, the threshold chosen on train only, the
directory the service's classifier loads and scores as the metrics say)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO
from trainers.guardrails.baseline.train import main
from trainers.guardrails.scoring import (
    Labelled,
    operating_point,
    roc_auc,
    stratified_folds,
    threshold_at_fpr,
)

FIXTURE = REPO / "tests" / "fixtures" / "injections"


# -- pieces --------------------------------------------------------------------------------


def test_threshold_keeps_false_positives_at_or_below_the_target() -> None:
    rng = np.random.default_rng(0)
    labels = np.array([0] * 200 + [1] * 100)
    scores = np.concatenate([rng.normal(0, 1, 200), rng.normal(2.5, 1, 100)])
    for target in (0.0, 0.01, 0.05, 0.2):
        t = threshold_at_fpr(scores, labels, target)
        point = operating_point(scores, labels, t)
        assert point["fpr"] <= target
        # The lowest such threshold: one step lower lets one benign score too many through.
        below = np.sort(scores[scores < t])[-1]
        assert operating_point(scores, labels, below)["fpr"] > target
    # Perfectly separated: every positive flagged, no benign one.
    t = threshold_at_fpr(np.array([0.1, 0.2, 0.9, 1.0]), np.array([0, 0, 1, 1]), 0.0)
    assert 0.2 < t < 0.9
    assert roc_auc(np.array([0.1, 0.2, 0.9, 1.0]), np.array([0, 0, 1, 1])) == 1.0


def test_folds_are_stratified_disjoint_and_cover_every_row() -> None:
    labels = np.array([1] * 10 + [0] * 20)
    folds = stratified_folds(labels, 5, seed=3)
    rows = np.concatenate(folds)
    assert sorted(rows.tolist()) == list(range(30))
    assert all(labels[f].sum() == 2 and len(f) == 6 for f in folds)
    assert [f.tolist() for f in folds] == [f.tolist() for f in stratified_folds(labels, 5, 3)]


def test_fixture_loads_with_both_labels() -> None:
    train = Labelled.load(FIXTURE / "train.jsonl")
    assert len(train.texts) == 44 and train.positives == 20


# -- runs ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def head_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("guardrails-trainer") / "head"
    argv = ["--data", str(FIXTURE), "--out", str(out), "--method", "head", "--max-length", "64",
            "--folds", "3", "--seed", "11"]  # fmt: skip
    assert main(argv) == 0
    return out


def test_head_run_writes_a_served_model(head_run: Path) -> None:
    for name in ("model.onnx", "model_int8.onnx", "head.json", "tokenizer.json",
                 "metrics.json", "manifest.json", "README.md"):  # fmt: skip
        assert (head_run / name).is_file(), name
    head = json.loads((head_run / "head.json").read_text())
    metrics = json.loads((head_run / "metrics.json").read_text())
    manifest = json.loads((head_run / "manifest.json").read_text())
    assert head["format"] == "ragrail-injection-classifier/1"
    assert len(head["weights"]) == 384 and head["encoder"]["max_length"] == 64
    assert head["threshold"] == metrics["threshold"]
    # The threshold comes from out-of-fold training scores, never from the test split.
    assert metrics["calibration"]["kind"] == "3-fold out-of-fold"
    assert metrics["calibration"]["rows"] == 44
    assert metrics["calibration"]["fpr"] <= 0.03
    assert set(manifest["files"]) == {"model.onnx", "model_int8.onnx", "head.json"}
    assert manifest["params"]["seed"] == 11 and "TPR" in (head_run / "README.md").read_text()

    # The service's loader scores the test split as the trainer measured it.
    from shared.models.classifier import InjectionClassifier

    classifier = InjectionClassifier(head_run)
    test = Labelled.load(FIXTURE / "test.jsonl")
    scores = classifier.scores(classifier.embed(test.texts))
    point = operating_point(scores, test.labels, classifier.threshold)
    assert point["tpr"] == metrics["test"]["at_threshold"]["tpr"]
    assert point["fpr"] == metrics["test"]["at_threshold"]["fpr"]
    assert metrics["test"]["auc"] >= 0.9  # the fixture's injections are unmistakable


def test_finetune_run_also_writes_the_embedding_encoder(tmp_path: Path) -> None:
    out = tmp_path / "ft"
    argv = ["--data", str(FIXTURE), "--out", str(out), "--max-length", "32", "--epochs", "1",
            "--batch-size", "16", "--seed", "2"]  # fmt: skip
    assert main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    head = json.loads((out / "head.json").read_text())
    assert metrics["method"] == "finetune"
    assert metrics["calibration"]["kind"] == "held-out"
    assert metrics["calibration"]["rows"] + metrics["calibration"]["fit_rows"] == 44
    assert metrics["train"]["steps"] == 3  # ceil(35 fit rows / 16)
    assert (out / "model.safetensors").is_file()
    assert head["embedding"] == {"path": "embedding", "onnx_file": "model_int8.onnx"}
    assert (out / "embedding" / "model_int8.onnx").is_file()
    assert not (out / "embedding" / "model.onnx").exists()
    with pytest.raises(SystemExit, match="already holds a model"):
        main(argv)


def test_calibrate_sets_a_retrieval_threshold_from_benign_documents(
    head_run: Path, tmp_path: Path
) -> None:
    from trainers.guardrails.calibrate import main as calibrate

    model = tmp_path / "model"
    import shutil

    shutil.copytree(head_run, model)
    docs = tmp_path / "docs.txt"
    passages = [
        p.read_text(encoding="utf-8").replace("\n", " ")
        for p in sorted((REPO / "samples" / "corpus").iterdir())
    ]
    docs.write_text("\n".join(passages) + "\n", encoding="utf-8")
    assert calibrate(["--model", str(model), "--docs", str(docs), "--target-fpr", "0"]) == 0
    head = json.loads((model / "head.json").read_text())
    stats = json.loads((model / "metrics.json").read_text())["retrieval_calibration"]
    # Never below the prompt threshold, and above every benign document's score at FPR 0.
    assert head["retrieval_threshold"] >= head["threshold"]
    assert stats["fpr"] == 0.0 and stats["documents"] == len(passages)
    assert head["retrieval_threshold"] == stats["retrieval_threshold"]


def test_in_domain_questions_train_and_hold_the_threshold(tmp_path: Path) -> None:
    """--in-domain: the train-qrels queries of a BEIR directory become benign training rows,
    the threshold keeps their false-positive rate at the target too, and the test-qrels
    queries are only measured (an id in both files is never trained on)."""
    from trainers.guardrails.in_domain import InDomain

    beir = tmp_path / "beir"
    shutil.copytree(REPO / "tests" / "fixtures" / "beir_tiny", beir)
    test_ids = [
        line.split("\t")[0]
        for line in (beir / "qrels" / "test.tsv").read_text().splitlines()[1:]
        if line.strip()
    ]
    # One test query also listed under train: it must stay out of training.
    with (beir / "qrels" / "train.tsv").open("a", encoding="utf-8") as f:
        f.write(f"{test_ids[0]}\td01\t1\n")
    data = InDomain.load(beir)
    queries = {
        json.loads(line)["_id"]: json.loads(line)["text"]
        for line in (beir / "queries.jsonl").read_text().splitlines()
        if line.strip()
    }
    assert queries[test_ids[0]] in data.test and queries[test_ids[0]] not in data.train
    assert not set(data.train) & set(data.test)

    out = tmp_path / "model"
    argv = ["--data", str(FIXTURE), "--out", str(out), "--method", "head", "--max-length", "64",
            "--folds", "3", "--seed", "11", "--in-domain", str(beir),
            "--in-domain-fpr", "0"]  # fmt: skip
    assert main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    head = json.loads((out / "head.json").read_text())
    cal = metrics["calibration"]
    # The prompt set's rows and the in-domain rows are calibrated separately.
    assert cal["rows"] == 44 and cal["in_domain"]["rows"] == len(data.train)
    assert cal["in_domain"]["fpr"] == 0.0
    assert head["threshold"] >= cal["in_domain"]["threshold"]
    assert head["threshold"] >= cal["in_domain"]["prompt_threshold"]
    assert metrics["train"]["examples"] == 44 + len(data.train)
    test = metrics["in_domain"]["test"]
    assert test["questions"] == len(data.test) and 0.0 <= test["fpr"] <= 1.0
    assert manifest["data"]["in_domain"]["train_questions"] == len(data.train)
    assert "in-domain" in (out / "README.md").read_text()

    # The service's classifier scores the in-domain test questions as the trainer measured.
    from shared.models.classifier import InjectionClassifier

    classifier = InjectionClassifier(out)
    flagged = int((classifier.scores(classifier.embed(data.test)) >= classifier.threshold).sum())
    assert flagged == test["flagged"]
