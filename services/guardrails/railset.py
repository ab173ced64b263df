"""Loads the configured rails once, at startup: the models every rail may share
(Resources: the injection classifier, the sentence encoders and their caches), then each
registered rail (services/guardrails/rails/) that config.yml's `rails:` section uses. Whatever
fails to load stops the service with the file or setting named."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from services.guardrails.classifier import InjectionClassifier, resolve_injection_model
from services.guardrails.rail_config import ragrail_section
from services.guardrails.rails import RAILS, Flow, Rail, flows_by_name
from services.guardrails.rails.base import STAGES, Action, Embed, LoadedRail, Resources, Stage
from services.guardrails.settings import GuardrailsSettings
from shared.models.guard import GuardModel, ScoreCache, find_guard_model

log = logging.getLogger(__name__)


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
    """The loaded rails, and what the engines need to run their flows."""

    config: BaseModel  # custom_data.ragrail, one validated section per registered rail
    config_file: Path
    resources: Resources
    loaded: dict[str, LoadedRail]  # by rail name: the rails a configured flow uses
    flows: dict[str, tuple[Rail, Flow]]  # every flow of every registered rail

    @property
    def classifier(self) -> InjectionClassifier | GuardModel:
        return self.resources.classifier

    def actions(self, from_nemo: bool = True) -> dict[str, Action]:
        """The loaded rails' actions by name; without `from_nemo`, not those of NeMo
        Guardrails' library flows (the nemo engine must not replace NeMo's own actions)."""
        return {
            name: action
            for rail in RAILS
            if rail.name in self.loaded and (from_nemo or not rail.from_nemo)
            for name, action in self.loaded[rail.name].actions.items()
        }

    def info(self) -> dict[str, str]:
        """What the loaded rails add to the service's Info details."""
        return {k: v for loaded in self.loaded.values() for k, v in loaded.info.items()}


def embedding_source(classifier: InjectionClassifier | GuardModel) -> tuple[Path, str]:
    """The general sentence encoder the trainer paired with the classifier (head.json's or
    guard.json's `embedding`): the classifier's own encoder when it was not fine-tuned."""
    spec = classifier.config if isinstance(classifier, GuardModel) else classifier.head
    entry = spec.get("embedding") or {"path": ".", "onnx_file": classifier.onnx_file}
    return (classifier.path / str(entry["path"])).resolve(), str(entry["onnx_file"])


def paired_encoder(classifier: InjectionClassifier | GuardModel, threads: int) -> Embed:
    from services.guardrails import embeddings

    path, onnx_file = embedding_source(classifier)
    return embeddings.encoder(path, onnx_file, threads).embed  # type: ignore[no-any-return]


def configured_flows(rails_config: Any) -> dict[Stage, list[str]]:
    return {stage: list(getattr(rails_config.rails, stage).flows) for stage in STAGES}


def load_railset(
    settings: GuardrailsSettings,
    rails_config: Any,
    config_file: Path,
    general_embedder: Callable[[InjectionClassifier | GuardModel], Embed] | None = None,
) -> RailSet:
    """Everything but NeMo Guardrails itself. `general_embedder` gives the sentence embedding
    for topics and groundedness once the classifier is known (server.py passes NeMo
    Guardrails' configured embedding model); without it, the trainer's paired encoder."""
    sections = ragrail_section(rails_config.custom_data or {}, config_file)
    # The guard model when one is trained (or named); else the older single-head classifier.
    guard_path = None if settings.injection_model else find_guard_model(settings.guard_model)
    guard: ScoreCache | None = None
    classifier: InjectionClassifier | GuardModel
    if guard_path is not None:
        guard = ScoreCache(GuardModel(guard_path, threads=settings.threads))
        classifier = guard.model
        # Its graph also gives the packaged MiniLM's embedding: the topic rail reads the
        # message's vector from the same cached run as the injection and safety rails.
        classifier_vectors = VectorCache(guard.embed)
    else:
        classifier = InjectionClassifier(
            resolve_injection_model(settings.injection_model), threads=settings.threads
        )
        classifier_vectors = VectorCache(classifier.embed)
    if general_embedder is None:
        embed_general = paired_encoder(classifier, settings.threads)
    else:
        embed_general = general_embedder(classifier)
    same = guard is not None or (
        classifier.frozen_base
        and embedding_source(classifier) == (classifier.path.resolve(), classifier.onnx_file)
    )
    flows = flows_by_name()
    resources = Resources(
        settings=settings,
        rails_config=rails_config,
        config_file=config_file,
        classifier=classifier,
        classifier_vectors=classifier_vectors,
        general_vectors=classifier_vectors if same else VectorCache(embed_general),
        embed_general=embed_general,
        flows=configured_flows(rails_config),
        general_vector_flows=frozenset(n for n, (_, f) in flows.items() if f.general_vectors),
        guard=guard,
    )
    used = {name for names in resources.flows.values() for name in names}
    loaded = {}
    for rail in RAILS:
        if not used & {f.name for f in rail.flows}:
            continue  # none of its flows runs: its models are not loaded
        section = getattr(sections, rail.name) if rail.settings is not None else None
        loaded[rail.name] = rail.load(section, resources)
    log.info("rails loaded", extra={"rails": list(loaded)})
    return RailSet(sections, config_file, resources, loaded, flows)
