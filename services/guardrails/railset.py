"""Loads every model and rail once, at startup, from the settings and the config directory.
Whatever fails to load stops the service with the file or setting named."""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from services.guardrails.classifier import InjectionClassifier, resolve_injection_model
from services.guardrails.rail_config import RagrailRails
from services.guardrails.rails.denylist import DenyListRail
from services.guardrails.rails.grounding import (
    CrossEncoderScorer,
    EmbeddingScorer,
    GroundingRail,
)
from services.guardrails.rails.injection import InjectionRail
from services.guardrails.rails.limits import LimitsRail
from services.guardrails.rails.pii import PiiDetector, PiiRail
from services.guardrails.rails.topics import TopicRail
from services.guardrails.settings import GuardrailsSettings
from shared.errors import FailedPrecondition

log = logging.getLogger(__name__)
RERANKER_MODELS = Path("models") / "reranker"


class VectorCache:
    """The classifier's vectors of recent texts: the injection rail and a topic rail sharing
    its encoder embed a message once per check."""

    def __init__(self, embed: Callable[[list[str]], np.ndarray], size: int = 256) -> None:
        self._embed = embed
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()  # checks run on several worker threads

    def __call__(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            found = {t: self._items[t] for t in texts if t in self._items}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            found.update(zip(missing, self._embed(missing), strict=True))
        with self._lock:
            for t in dict.fromkeys(texts):
                self._items[t] = found[t]
                self._items.move_to_end(t)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return np.stack([found[t] for t in texts])

    def cached(self, text: str) -> np.ndarray | None:
        with self._lock:
            return self._items.get(text)


@dataclass
class RailSet:
    config: RagrailRails
    config_file: Path
    classifier: InjectionClassifier
    injection: InjectionRail
    pii: PiiDetector
    pii_input: PiiRail
    pii_output: PiiRail
    pii_retrieval: PiiRail
    topics: TopicRail
    limits: LimitsRail
    deny_list: DenyListRail
    grounding: GroundingRail
    embedding_model: str
    classifier_vectors: VectorCache
    general_vectors: VectorCache


def chunk_threshold(rails: RagrailRails, classifier: InjectionClassifier) -> float:
    if rails.injection.retrieval_threshold is not None:
        return rails.injection.retrieval_threshold
    calibrated = classifier.head.get("retrieval_threshold")
    if calibrated is not None:
        return float(calibrated)
    log.warning(
        "the injection classifier has no retrieval threshold; chunks are judged at the prompt "
        "threshold, which flags many benign documents. Run `python -m "
        "trainers.guardrails.calibrate --model DIR --docs <corpus.jsonl>`",
        extra={"model": str(classifier.path)},
    )
    return classifier.threshold


def ragrail_section(custom_data: dict[str, Any], config_file: Path) -> RagrailRails:
    try:
        return RagrailRails.model_validate(custom_data.get("ragrail") or {})
    except ValidationError as exc:
        problems = "; ".join(
            f"custom_data.ragrail.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors()
        )
        raise FailedPrecondition(f"{config_file}: {problems}") from exc


def embedding_source(classifier: InjectionClassifier) -> tuple[Path, str]:
    """The general sentence encoder the trainer paired with the classifier (head.json's
    `embedding`): the classifier's own encoder when it was not fine-tuned."""
    entry = classifier.head.get("embedding") or {"path": ".", "onnx_file": classifier.onnx_file}
    return (classifier.path / str(entry["path"])).resolve(), str(entry["onnx_file"])


def good_reranker(setting: str) -> tuple[Path | None, str]:
    """(model dir, why) for the cross-encoder scorer: the configured one, else the newest
    trained reranker whose own evaluation beats BM25 (one that ranks worse would judge
    support no better), with an ONNX file the onnx pipeline loads."""
    from services.reranker.backends.base import newest_trained_model

    if setting:
        return Path(setting), "configured"
    found = newest_trained_model(Path.cwd() / RERANKER_MODELS, "model.onnx")
    if found is None:
        return None, f"no trained reranker with model.onnx under {RERANKER_MODELS}"
    try:
        ndcg = json.loads((found / "metrics.json").read_text(encoding="utf-8"))["ndcg@10"]
        after, bm25 = float(ndcg["after"]), float(ndcg["bm25"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, f"{found} has no evaluation in metrics.json"
    if after <= bm25:
        return None, f"{found} ranks worse than BM25 (nDCG@10 {after:.3f} vs {bm25:.3f})"
    return found, "newest trained reranker"


def grounding_scorer(
    rails: RagrailRails, settings: GuardrailsSettings, embed: Callable[[list[str]], np.ndarray]
) -> tuple[Any, float]:
    wanted = rails.grounding.scorer
    if wanted in ("auto", "cross-encoder"):
        path, why = good_reranker(settings.grounding_model)
        if path is not None:
            from services.reranker.backends.onnx import OnnxCrossEncoder

            onnx_file = "model_int8.onnx" if (path / "model_int8.onnx").is_file() else "model.onnx"
            try:
                model = OnnxCrossEncoder(path, onnx_file, threads=settings.threads)
            except FailedPrecondition:
                raise
            except Exception as exc:
                raise FailedPrecondition(
                    f"cannot load the grounding cross-encoder {path / onnx_file}: "
                    f"{type(exc).__name__}: {str(exc)[:300]}"
                ) from exc
            log.info("grounding scorer: cross-encoder", extra={"model": str(path / onnx_file)})
            scorer: Any = CrossEncoderScorer(model, str(path / onnx_file))
            return scorer, rails.grounding.cross_encoder_threshold
        if wanted == "cross-encoder":
            raise FailedPrecondition(
                f"grounding scorer cross-encoder: {why}; set RAGRAIL_GUARDRAILS_GROUNDING_MODEL "
                "or use scorer: embedding"
            )
        log.info("grounding scorer: embedding similarity", extra={"why_not_cross_encoder": why})
    return EmbeddingScorer(embed), rails.grounding.embedding_threshold


Embed = Callable[[list[str]], np.ndarray]


def paired_encoder(classifier: InjectionClassifier, threads: int) -> Embed:
    from services.guardrails import embeddings

    path, onnx_file = embedding_source(classifier)
    return embeddings.encoder(path, onnx_file, threads).embed  # type: ignore[no-any-return]


def load_railset(
    settings: GuardrailsSettings,
    custom_data: dict[str, Any],
    config_file: Path,
    general_embedder: Callable[[InjectionClassifier], Embed] | None = None,
) -> RailSet:
    """Everything but NeMo Guardrails itself. `general_embedder` gives the sentence embedding
    for topics and groundedness once the classifier is known (engine.py passes NeMo
    Guardrails' configured embedding model); without it, the trainer's paired encoder."""
    rails = ragrail_section(custom_data, config_file)
    classifier = InjectionClassifier(
        resolve_injection_model(settings.injection_model), threads=settings.threads
    )
    classifier_vectors = VectorCache(classifier.embed)
    if general_embedder is None:
        embed_general = paired_encoder(classifier, settings.threads)
    else:
        embed_general = general_embedder(classifier)
    same = classifier.frozen_base and embedding_source(classifier) == (
        classifier.path.resolve(),
        classifier.onnx_file,
    )
    general_vectors = classifier_vectors if same else VectorCache(embed_general)
    threshold = rails.injection.threshold
    pii = PiiDetector(rails.pii.entities, rails.pii.score_threshold, rails.pii.extended_recognizers)
    # Uncached: context windows rarely repeat, and a cache would flatter the latency.
    scorer, grounding_threshold = grounding_scorer(rails, settings, embed_general)
    return RailSet(
        config=rails,
        config_file=config_file,
        classifier=classifier,
        injection=InjectionRail(
            classifier,
            classifier.threshold if threshold is None else threshold,
            chunk_threshold(rails, classifier),
        ),
        pii=pii,
        pii_input=PiiRail(pii, rails.pii.input_action),
        pii_output=PiiRail(pii, rails.pii.output_action),
        pii_retrieval=PiiRail(pii, "block" if rails.pii.retrieval_action == "drop" else "mask"),
        topics=TopicRail(
            general_vectors,
            [t.model_dump() for t in rails.topics.allowed],
            [t.model_dump() for t in rails.topics.denied],
            rails.topics.allowed_threshold,
            rails.topics.denied_threshold,
        ),
        limits=LimitsRail(
            rails.limits.max_chars, rails.limits.max_lines, rails.limits.hidden_chars
        ),
        deny_list=DenyListRail(
            [p.model_dump() for p in rails.deny_list.patterns], f"{config_file} deny_list"
        ),
        grounding=GroundingRail(
            scorer,
            grounding_threshold,
            rails.grounding.min_supported,
            rails.grounding.action,
            rails.grounding.window_chars,
            rails.grounding.candidates,
        ),
        embedding_model=getattr(scorer, "model_name", "embedding"),
        classifier_vectors=classifier_vectors,
        general_vectors=general_vectors,
    )
