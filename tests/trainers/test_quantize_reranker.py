"""`python -m trainers.quantize reranker` on a tiny reranker trained here: files, metrics, INT8
scores against PyTorch, and the reranker service's onnx backend loading model_int8.onnx.

The model is trained in process by trainers.reranker on tests/fixtures/beir_tiny (seconds, no
model.onnx, so the recipe exports one); the command then runs once as a process with --data
on the same fixture. A second, in-process run quantizes that output again (it now holds a
model.onnx, which is copied) on the built-in sample pairs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO
from tests.trainers.quantize_cli import run_quantize

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

TINY_BEIR = REPO / "tests" / "fixtures" / "beir_tiny"
# The brief's tiny run; evaluation cut to one query, it only slows the fixture down.
TINY_TRAINING = [
    "--data", str(TINY_BEIR), "--max-queries", "8", "--negatives", "2", "--max-length", "64",
    "--epochs", "1", "--batch-size", "8", "--eval-max-queries", "1", "--eval-depth", "5",
    "--seed", "7",
]  # fmt: skip
# INT8 scores of the tiny model differ from PyTorch's by about 0.002 at most (sigmoid
# outputs near 0.5); ten times that still catches a broken quantization (per-tensor scales
# on the wrong nodes, a model.onnx from other weights).
INT8_ATOL = 0.02
# Twice the largest INT8 score error measured on the tiny model (0.0015).
RANK_GAP = 0.003
QUERIES = (
    "how do honeybees tell each other where flowers are",
    "what makes sourdough bread rise",
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from trainers.reranker.train import main

    out = tmp_path_factory.mktemp("reranker") / "tiny"
    assert main([*TINY_TRAINING, "--out", str(out)]) == 0
    assert (out / "config.json").is_file() and not (out / "model.onnx").exists()
    return out


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    out = tmp_path_factory.mktemp("quantized") / "tiny-int8"
    stdout = run_quantize(
        "reranker", "--model", str(tiny_model), "--out", str(out), "--data", str(TINY_BEIR),
        "--eval-max-queries", "4", "--eval-depth", "10", "--bench-pairs", "24", "--repeats",
        "1", "--batch-size", "8", "--threads", "1",
    )  # fmt: skip
    assert "pairs/s: torch FP32" in stdout and "nDCG@10: BM25" in stdout
    return out


def corpus() -> list[str]:
    from trainers.data import Beir

    return list(Beir.load(TINY_BEIR).corpus.values())


def ranks(scores: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(-scores, kind="stable"), kind="stable").astype(float)


def separated(scores: np.ndarray, gap: float) -> list[int]:
    """Indices of passages, best first, each scored at least `gap` below the one before."""
    kept: list[int] = []
    for i in np.argsort(-scores, kind="stable"):
        if not kept or scores[kept[-1]] - scores[i] >= gap:
            kept.append(int(i))
    return kept


# -- what the command writes -----------------------------------------------------------------


def test_writes_a_complete_model_directory(quantized: Path) -> None:
    for name in (
        "model.onnx",
        "model_int8.onnx",
        "model.safetensors",  # the sentence-transformers backend loads the directory too
        "config.json",
        "config_sentence_transformers.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "metrics.json",
        "manifest.json",
        "README.md",
    ):
        assert (quantized / name).is_file(), name
    # MatMul weights in 8 bits; the embedding tables stay FP32.
    fp32, int8 = ((quantized / n).stat().st_size for n in ("model.onnx", "model_int8.onnx"))
    assert int8 < 0.8 * fp32


def test_int8_graph_keeps_the_interface_and_is_quantized(quantized: Path) -> None:
    import onnx

    model = onnx.load(str(quantized / "model_int8.onnx"))
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask", "token_type_ids"]
    (output,) = model.graph.output
    assert output.name == "logits"
    assert output.type.tensor_type.shape.dim[1].dim_value == 1
    ops = {n.op_type for n in model.graph.node}
    assert {"MatMulInteger", "DynamicQuantizeLinear"} <= ops


def test_metrics_and_manifest(quantized: Path) -> None:
    from shared.models.quantize import sha256

    metrics = json.loads((quantized / "metrics.json").read_text(encoding="utf-8"))
    for engine in ("torch_fp32", "onnx_fp32", "onnx_int8"):
        assert metrics["pairs_per_s"][engine] > 0
        assert len(metrics["pairs_per_s"]["runs"][engine]) == 1
    assert metrics["pairs"]["count"] == metrics["pairs"]["distinct"] == 24
    assert "BM25 top 10 of 4 queries" in metrics["pairs"]["source"]
    assert (metrics["batch_size"], metrics["threads"], metrics["max_length"]) == (8, 1, 64)
    diff = metrics["score_diff_vs_torch_fp32"]
    assert diff["onnx_fp32"]["max_abs"] < 1e-4
    assert 0 < diff["onnx_int8"]["max_abs"] < INT8_ATOL, diff
    assert diff["onnx_int8"]["mean_abs"] <= diff["onnx_int8"]["max_abs"]

    ndcg = metrics["ndcg@10"]
    assert (ndcg["queries"], ndcg["depth"], ndcg["pairs"]) == (4, 10, 40)
    for key in ("bm25", "torch_fp32", "onnx_int8"):
        assert 0 <= ndcg[key] <= 1
    assert ndcg["difference"] == pytest.approx(ndcg["onnx_int8"] - ndcg["torch_fp32"], abs=1e-5)
    assert abs(ndcg["difference"]) < 0.2
    assert ndcg["score_diff_int8_vs_torch"]["max_abs"] < INT8_ATOL

    manifest = json.loads((quantized / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["metrics"] == metrics
    assert manifest["source"]["data"]["path"] == str(TINY_BEIR)
    assert manifest["onnx"]["source"].startswith("exported")
    assert manifest["quantization"]["variant"] == "matmul-per-channel"
    assert manifest["quantization"]["per_channel"] is True
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == sha256(quantized / name), name
    card = (quantized / "README.md").read_text(encoding="utf-8")
    assert "RAGRAIL_RERANKER_ONNX_FILE=model_int8.onnx" in card
    assert "pairs/s" in card and f"{ndcg['onnx_int8']:.4f}" in card


# -- the service loads it ----------------------------------------------------------------------


def test_service_onnx_backend_loads_int8_and_ranks_like_torch(quantized: Path) -> None:
    from services.reranker.backends import load_backend
    from services.reranker.settings import RerankerSettings

    torch_backend = load_backend(RerankerSettings(model=str(quantized), batch_size=4))
    int8 = load_backend(
        RerankerSettings(
            model=str(quantized), backend="onnx", onnx_file="model_int8.onnx", batch_size=4
        )
    )
    fp32 = load_backend(RerankerSettings(model=str(quantized), backend="onnx", batch_size=4))
    assert int8.file == quantized / "model_int8.onnx"  # type: ignore[attr-defined]
    assert fp32.file == quantized / "model.onnx"  # type: ignore[attr-defined]
    assert int8.max_length == torch_backend.max_length == 64

    passages = corpus()
    for query in QUERIES:
        want = torch_backend.score(query, passages)
        got = int8.score(query, passages)
        assert got.shape == want.shape == (len(passages),) and got.dtype == np.float32
        assert np.allclose(got, want, atol=INT8_ATOL), np.abs(got - want).max()
        assert np.allclose(fp32.score(query, passages), want, atol=1e-4)
        # The tiny model's scores of one query lie within about 0.02 of each other, so
        # neighbours a thousandth apart may swap: the ranking is held to a rank correlation
        # close to 1, and to the exact order of passages PyTorch scores RANK_GAP apart.
        spearman = float(np.corrcoef(ranks(got), ranks(want))[0, 1])
        assert spearman > 0.9, (query, spearman)
        apart = separated(want, RANK_GAP)
        assert len(apart) >= 3, want
        assert list(np.argsort(-got[apart], kind="stable")) == list(range(len(apart)))


# -- determinism, the copied model.onnx, checks --------------------------------------------


def test_export_and_quantization_are_deterministic(
    quantized: Path, tiny_model: Path, tmp_path: Path
) -> None:
    """The same model and arguments give the same ONNX bytes (the manifest's hashes)."""
    from shared.models.quantize import quantize_dynamic_variant, sha256
    from trainers.quantize.reranker_model import fp32_onnx, load_cross_encoder

    model = load_cross_encoder(tiny_model, 0)
    fp32_onnx(model, tiny_model, tmp_path, export=True)
    quantize_dynamic_variant(
        tmp_path / "model.onnx", tmp_path / "model_int8.onnx", "matmul-per-channel"
    )
    manifest = json.loads((quantized / "manifest.json").read_text(encoding="utf-8"))
    for name in ("model.onnx", "model_int8.onnx"):
        assert sha256(tmp_path / name) == manifest["files"][name]["sha256"], name


def test_copies_an_existing_model_onnx_and_fails_past_max_score_diff(
    quantized: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory that already holds model.onnx (here the first run's output) keeps it;
    without --data the pairs are the built-in ones; --max-score-diff 0 fails the command
    after writing everything (an INT8 score is never exactly the FP32 one)."""
    from shared.models.quantize import sha256
    from trainers.quantize.reranker import main

    out = tmp_path / "again"
    argv = [
        "--model", str(quantized), "--out", str(out), "--bench-pairs", "6", "--repeats", "1",
        "--batch-size", "3", "--threads", "1", "--max-score-diff", "0",
    ]  # fmt: skip
    assert main(argv) == 1
    assert "INT8 fails its check" in capsys.readouterr().err
    assert sha256(out / "model.onnx") == sha256(quantized / "model.onnx")
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert "samples/corpus" in metrics["pairs"]["source"] and "ndcg@10" not in metrics
    assert metrics["score_diff_vs_torch_fp32"]["onnx_int8"]["max_abs"] < INT8_ATOL
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["onnx"]["source"].startswith("copied from")
    # The same seed picks the same pairs; another seed others.
    from trainers.quantize.reranker_pairs import bench_pairs, sample_pairs

    pool, _ = sample_pairs()
    assert bench_pairs(pool, 6, 42) == bench_pairs(pool, 6, 42) != bench_pairs(pool, 6, 43)
    assert len(bench_pairs(pool[:2], 5, 1)) == 5  # cycles through a small pool


def test_refuses_to_overwrite_and_validates_flags(quantized: Path, tiny_model: Path) -> None:
    from trainers.quantize.reranker import default_out, parse_args, quantize

    with pytest.raises(SystemExit, match="already holds a model"):
        quantize(parse_args(["--model", str(tiny_model), "--out", str(quantized)]))
    with pytest.raises(SystemExit, match="another directory than --model"):
        quantize(parse_args(["--model", str(tiny_model), "--out", str(tiny_model)]))
    with pytest.raises(SystemExit, match="does not exist"):
        quantize(parse_args(["--model", str(tiny_model / "missing"), "--out", "/nonexistent"]))
    for bad in (["--bench-pairs", "0"], ["--eval-depth", "0"], ["--threads", "-1"], []):
        with pytest.raises(SystemExit):
            parse_args(["--model", "x", *bad] if bad else bad)  # [] lacks --model
    args = parse_args(["--model", "models/reranker/minilm-scifact/20300101-000000"])
    assert default_out(args) == Path("models/reranker/minilm-scifact-int8/20300101-000000")
