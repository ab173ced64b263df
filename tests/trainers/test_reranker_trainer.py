"""trainers.reranker: BEIR loading, BM25 negatives, nDCG, and tiny training runs in process
(files written, same seed gives the same model, the saved directory loads in CrossEncoder)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO
from trainers.data import Beir, Bm25, ndcg_at
from trainers.reranker.evaluation import EvalSet, rerank_ndcg
from trainers.reranker.negatives import mine_negatives, training_groups, training_pairs
from trainers.reranker.train import main, parse_args

TINY_BEIR = REPO / "tests" / "fixtures" / "beir_tiny"
PAIRS = [
    ("how do honeybees tell each other where flowers are", "Bees dance to point at flowers."),
    ("how do honeybees tell each other where flowers are", "TCP opens with a handshake."),
    ("what makes sourdough bread rise", "Wild yeast ferments flour sugars into gas."),
]


def tiny_run(out: Path, seed: int, *extra: str) -> Path:
    argv = [
        "--data", str(TINY_BEIR), "--out", str(out), "--max-queries", "6", "--negatives", "2",
        "--max-length", "64", "--epochs", "1", "--batch-size", "2", "--eval-max-queries", "3",
        "--eval-depth", "10", "--seed", str(seed), *extra,
    ]  # fmt: skip
    assert main(argv) == 0
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reranker-trainer")
    return {
        "a": tiny_run(root / "a", 3),
        "a_again": tiny_run(root / "a_again", 3),
        "b": tiny_run(root / "b", 4),
    }


def predict(path: Path) -> np.ndarray:
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(str(path), local_files_only=True, device="cpu")
    assert model.num_labels == 1
    assert model.max_seq_length == 64
    return np.asarray(model.predict(PAIRS, show_progress_bar=False))


# -- pieces --------------------------------------------------------------------------------


def test_beir_loading_and_negatives() -> None:
    data = Beir.load(TINY_BEIR)
    assert len(data.corpus) == 30 and len(data.queries) == 20
    assert data.corpus["d01"].startswith("Honeybee waggle dance\n\nForager honeybees")
    train, test = data.qrels("train"), data.qrels("test")
    assert len(train) == 12 and len(test) == 8 and not set(train) & set(test)
    assert train["q01"] == {"d01": 1}

    args = parse_args(["--data", str(TINY_BEIR), "--negatives", "3"])
    negatives = mine_negatives(data, Bm25(data.corpus), train, args)
    for qid, docs in negatives.items():
        assert len(docs) == 3 and len(set(docs)) == 3
        assert not set(docs) & set(train[qid])
    # Hard negatives: the BM25 neighbours, e.g. other documents about bees.
    assert {"d02", "d03"} & set(negatives["q01"])

    # Dense negatives come after BM25's, each document once, never a relevant one.
    args = parse_args(["--data", str(TINY_BEIR), "--negatives", "3", "--dense-negatives", "2"])
    both = mine_negatives(data, Bm25(data.corpus), train, args)
    for qid, docs in both.items():
        assert docs[:3] == negatives[qid] and len(set(docs)) == 5
        assert not set(docs) & set(train[qid])

    groups = training_groups(data, train, negatives)
    assert len(groups) == 12  # one per relevant passage
    assert all(len(g.negatives) == 3 and g.positive not in g.negatives for g in groups)
    pairs = training_pairs(groups)
    assert len(pairs) == 12 * (1 + 3)
    assert sum(label for _, _, label in pairs) == 12
    # A query with two relevant passages gives two groups but pairs its negatives once.
    two = training_pairs(training_groups(data, {"q01": {"d01": 1, "d02": 1}}, {"q01": ["d03"]}))
    assert sorted(label for _, _, label in two) == [0.0, 1.0, 1.0]
    assert data.sha256(["train", "test"]) == data.sha256(["test", "train"])
    assert data.sha256(["train"]) != data.sha256(["train", "test"])


def test_ndcg_at_10() -> None:
    assert ndcg_at(["a", "b"], {"a": 1}) == 1.0
    assert ndcg_at(["b", "a"], {"a": 1}) == pytest.approx(1 / math.log2(3))
    assert ndcg_at(["x"] * 10 + ["a"], {"a": 1}) == 0.0
    assert ndcg_at(["b", "a"], {"a": 2, "b": 1}) == pytest.approx(
        (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    )
    assert ndcg_at(["a"], {}) == 0.0


def test_evaluation_reranks_each_query_s_bm25_candidates() -> None:
    data = Beir.load(TINY_BEIR)
    qrels = data.qrels("test")
    ids = list(qrels)
    ranked = Bm25(data.corpus).search([data.queries[q] for q in ids], 100)
    evalset = EvalSet({q: data.queries[q] for q in ids}, qrels, dict(zip(ids, ranked, strict=True)))
    assert all(len(c) == 30 for c in evalset.candidates.values())  # depth capped at the corpus
    assert 0.5 < evalset.bm25_ndcg() <= 1.0
    relevant = {(data.queries[q], data.corpus[d]) for q, docs in qrels.items() for d in docs}

    class Oracle:
        def __init__(self, sign: float) -> None:
            self.sign = sign

        def predict(self, pairs: list[tuple[str, str]], **_: object) -> np.ndarray:
            return np.array([self.sign * (tuple(p) in relevant) for p in pairs], dtype=float)

    assert rerank_ndcg(Oracle(1.0), data, evalset, 8, "oracle") == 1.0
    assert rerank_ndcg(Oracle(-1.0), data, evalset, 8, "anti-oracle") == 0.0


def test_arguments_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--data", str(TINY_BEIR), "--epochs", "0"])
    assert "--epochs must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no qrels for split 'dev'"):
        main(["--data", str(TINY_BEIR), "--eval-split", "dev", "--out", "/nonexistent/x"])
    with pytest.raises(SystemExit, match="is no BEIR directory"):
        main(["--data", str(REPO / "tests" / "fixtures"), "--out", "/nonexistent/x"])


def test_default_output_is_models_reranker_name_version() -> None:
    from trainers.reranker.train import default_out

    args = parse_args(["--data", str(TINY_BEIR), "--version", "v1"])
    assert default_out(args) == Path("models/reranker/minilm-beir_tiny/v1")
    stamped = default_out(parse_args(["--data", str(TINY_BEIR), "--name", "n"]))
    assert stamped.parent == Path("models/reranker/n") and len(stamped.name) == 15


# -- training runs -------------------------------------------------------------------------


def test_a_run_writes_model_metrics_manifest_and_card(runs: dict[str, Path]) -> None:
    out = runs["a"]
    for name in ("config.json", "model.safetensors", "tokenizer.json", "README.md"):
        assert (out / name).is_file(), name
    assert not (out / "model.onnx").exists()  # only with --export-onnx

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["eval_split"] == "test" and metrics["eval_queries"] == 3
    assert metrics["depth"] == 10
    assert set(metrics["ndcg@10"]) == {"bm25", "before", "after"}
    assert all(0 <= v <= 1 for v in metrics["ndcg@10"].values())
    # Listwise: each of 6 queries against its passage, 2 hard and 1 in-batch negative.
    assert metrics["train"]["loss"] == "listwise" and metrics["train"]["examples"] == 6
    assert metrics["train"]["pairs"] == 6 * 4 and metrics["train"]["steps"] == 3

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["base"].startswith("sentence-transformers/all-MiniLM-L6-v2")
    assert "cross-entropy over each query's relevant passage" in manifest["method"]
    assert "BM25" in manifest["method"]
    assert manifest["data"]["sha256"] == Beir.load(TINY_BEIR).sha256(["train", "test"])
    assert manifest["format"] == ["sentence-transformers"]
    assert manifest["metrics"] == metrics
    assert manifest["params"]["seed"] == 3
    card = (out / "README.md").read_text()
    assert "nDCG@10" in card and f"{metrics['ndcg@10']['after']:.4f}" in card


def test_same_seed_gives_the_same_model(runs: dict[str, Path]) -> None:
    first, again, other = (predict(runs[k]) for k in ("a", "a_again", "b"))
    assert np.allclose(first, again, atol=1e-6), (first, again)
    assert not np.allclose(first, other, atol=1e-4)  # the seed matters
    metrics = [json.loads((runs[k] / "metrics.json").read_text()) for k in ("a", "a_again")]
    for m in metrics:
        m["train"].pop("seconds")
    assert metrics[0] == metrics[1]


def test_pointwise_loss_trains_on_labelled_pairs(tmp_path: Path) -> None:
    out = tiny_run(tmp_path / "bce", 3, "--loss", "bce", "--skip-before")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["train"]["loss"] == "bce"
    assert metrics["train"]["pairs"] == 6 * 3 and metrics["train"]["steps"] == 9
    assert metrics["ndcg@10"]["before"] is None
    assert "binary cross-entropy" in json.loads((out / "manifest.json").read_text())["method"]


def test_refuses_to_overwrite_a_model(runs: dict[str, Path]) -> None:
    with pytest.raises(SystemExit, match="already holds a model"):
        main(["--data", str(TINY_BEIR), "--out", str(runs["a"])])
