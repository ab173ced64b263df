"""Loads the configured rails at startup (and again on SIGHUP, reload.py): the models every
rail may share (Resources: the guard model or injection classifier, the sentence encoders and
their caches), then each registered rail (services/guardrails/rails/) that config.yml's
`rails:` section uses. Whatever fails to load stops the service with the file or setting
named; with nothing configured and no guard model trained yet, the rails on it are loaded
pending (they allow, saying why) and the others run."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from services.guardrails.rail_config import ragrail_section
from services.guardrails.rails import RAILS, Flow, Rail, flows_by_name
from services.guardrails.rails.base import (
    STAGES,
    Action,
    Embed,
    LoadedRail,
    Outcome,
    Resources,
    Stage,
    chunk_action,
)
from services.guardrails.settings import GuardrailsSettings
from shared.models import registry
from shared.models.classifier import (
    InjectionClassifier,
    find_injection_model,
    newest_injection_model,
)
from shared.models.guard import (
    GUARD_ROLE,
    GuardModel,
    ScoreCache,
    find_guard_model,
    newest_guard_model,
)
from shared.models.text_cache import TextResultCache

log = logging.getLogger(__name__)


class VectorCache:
    """The classifier's vectors of recent texts: the injection rail and a topic rail sharing
    its encoder embed a message once per check."""

    def __init__(self, embed: Callable[[list[str]], np.ndarray], size: int = 256) -> None:
        self._embed = embed
        self._vectors: TextResultCache[np.ndarray] = TextResultCache(size)

    def __call__(self, texts: list[str]) -> np.ndarray:
        return np.stack(self._vectors.results(texts, self._embed))

    def cached(self, text: str) -> np.ndarray | None:
        return self._vectors.get(text)


@dataclass
class RailSet:
    """The loaded rails, and what the engines need to run their flows."""

    config: BaseModel  # custom_data.ragrail, one validated section per registered rail
    config_file: Path
    resources: Resources
    loaded: dict[str, LoadedRail]  # by rail name: the rails a configured flow uses
    flows: dict[str, tuple[Rail, Flow]]  # every flow of every registered rail

    @property
    def classifier(self) -> InjectionClassifier | GuardModel | None:
        return self.resources.classifier

    @property
    def pending(self) -> bool:
        """The guard model is not trained yet: the rails on it allow (PENDING_REASON)."""
        return self.resources.pending

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


# What a rail on the guard model answers before that model is trained: it lets the text through
# and says why, so a fresh install serves with its other rails from the first start.
PENDING_REASON = (
    "pending: the guard model is not trained yet, so this rail allows everything; "
    "`ragrail up` trains it on first start, or run `python -m trainers.guardrails --all` and "
    "send the service SIGHUP"
)


@dataclass
class Models:
    """The classifiers the rails run on, as settings and models/guardrails/ give them."""

    guard: ScoreCache | None
    classifier: InjectionClassifier | GuardModel | None
    # Nothing configured and no guard model trained: its rails load pending.
    pending: bool = False


def load_models(settings: GuardrailsSettings) -> Models:
    """A configured model must load (a missing one stops the service); with nothing
    configured, the newest guard model under models/guardrails/, else the newest classifier of
    the older single-head recipe there (injection only), else the published guard model
    (registry.published_root), else none: the guard rails are pending."""
    if settings.injection_model:
        path = find_injection_model(settings.injection_model)
        return Models(None, InjectionClassifier(path, threads=settings.threads))
    trained = str(Path.cwd() / registry.models_root() / GUARD_ROLE)
    guard_path = find_guard_model(settings.guard_model, trained)
    if guard_path is None:
        older = newest_injection_model(trained)
        if older:
            return Models(None, InjectionClassifier(older, threads=settings.threads), pending=True)
        guard_path = newest_guard_model()  # the published one, if any
    if guard_path is not None:
        guard = ScoreCache(GuardModel(guard_path, threads=settings.threads))
        return Models(guard, guard.model)
    return Models(None, None, pending=True)


def embedding_source(classifier: InjectionClassifier | GuardModel) -> tuple[Path, str]:
    """The general sentence encoder the trainer paired with the classifier (head.json's or
    guard.json's `embedding`): the classifier's own encoder when it was not fine-tuned."""
    spec = classifier.config if isinstance(classifier, GuardModel) else classifier.head
    entry = spec.get("embedding") or {"path": ".", "onnx_file": classifier.onnx_file}
    return (classifier.path / str(entry["path"])).resolve(), str(entry["onnx_file"])


def paired_encoder(classifier: InjectionClassifier | GuardModel | None, threads: int) -> Embed:
    """The classifier's paired encoder; without a classifier, the packaged MiniLM."""
    from services.guardrails import embeddings

    if classifier is None:
        return embeddings.packaged().embed  # type: ignore[no-any-return]
    path, onnx_file = embedding_source(classifier)
    return embeddings.encoder(path, onnx_file, threads).embed  # type: ignore[no-any-return]


def configured_flows(rails_config: Any) -> dict[Stage, list[str]]:
    return {stage: list(getattr(rails_config.rails, stage).flows) for stage in STAGES}


def is_pending(rail: Rail, resources: Resources) -> bool:
    """The rail needs a model that is not trained yet (and none is configured)."""
    if not resources.pending or not rail.needs:
        return False
    return rail.needs == "guard" or resources.classifier is None


def pending_rail(rail: Rail) -> LoadedRail:
    """The rail's actions, each allowing with PENDING_REASON (each chunk on retrieval)."""

    def outcome() -> Outcome:
        return Outcome(reason=PENDING_REASON, details={"pending": True})

    async def allow(text: str = "", source: str = "input") -> dict[str, Any]:
        return outcome().action_value()

    each_chunk = chunk_action(rail.name, "allow", lambda chunks: [outcome() for _ in chunks])
    actions = {f.action: each_chunk if f.stage == "retrieval" else allow for f in rail.flows}
    return LoadedRail(actions, info={f"{rail.name}_rail": "pending"})


def load_railset(
    settings: GuardrailsSettings,
    rails_config: Any,
    config_file: Path,
    general_embedder: Callable[[InjectionClassifier | GuardModel | None], Embed] | None = None,
) -> RailSet:
    """Everything but NeMo Guardrails itself. `general_embedder` gives the sentence embedding
    for topics and groundedness once the classifier is known (server.py passes NeMo
    Guardrails' configured embedding model); without it, the trainer's paired encoder."""
    sections = ragrail_section(rails_config.custom_data or {}, config_file)
    models = load_models(settings)
    classifier, guard = models.classifier, models.guard
    if general_embedder is None:
        embed_general = paired_encoder(classifier, settings.threads)
    else:
        embed_general = general_embedder(classifier)
    # The guard model's graph also gives the packaged MiniLM's embedding: the topic rail reads
    # the message's vector from the same cached run as the injection and safety rails. With
    # no classifier yet, the one encoder is the packaged MiniLM.
    if guard is not None:
        classifier_vectors, same = VectorCache(guard.embed), True
    elif classifier is not None:
        classifier_vectors = VectorCache(classifier.embed)
        same = classifier.frozen_base and embedding_source(classifier) == (
            classifier.path.resolve(),
            classifier.onnx_file,
        )
    else:
        classifier_vectors, same = VectorCache(embed_general), True
    general_vectors = classifier_vectors if same else VectorCache(embed_general)
    flows = flows_by_name()
    resources = Resources(
        settings=settings,
        rails_config=rails_config,
        config_file=config_file,
        classifier=classifier,
        classifier_vectors=classifier_vectors,
        general_vectors=general_vectors,
        embed_general=embed_general,
        flows=configured_flows(rails_config),
        general_vector_flows=frozenset(n for n, (_, f) in flows.items() if f.general_vectors),
        guard=guard,
        pending=models.pending,
        sections=sections,
    )
    used = {name for names in resources.flows.values() for name in names}
    loaded = {}
    for rail in RAILS:
        if not used & {f.name for f in rail.flows}:
            continue  # none of its flows runs: its models are not loaded
        if is_pending(rail, resources):
            loaded[rail.name] = pending_rail(rail)
            continue
        section = getattr(sections, rail.name) if rail.settings is not None else None
        loaded[rail.name] = rail.load(section, resources)
    log.info("rails loaded", extra={"rails": list(loaded)})
    return RailSet(sections, config_file, resources, loaded, flows)
