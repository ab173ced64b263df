"""Groundedness as a NeMo Guardrails action: picks the scorer (support.py) the settings ask
for, then judges each answer against the context it came with."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from services.guardrails.rails.base import Embed, LoadedRail, Outcome, Resources, guarded
from services.guardrails.rails.grounding.settings import GroundingSettings
from services.guardrails.rails.grounding.support import (
    CrossEncoderScorer,
    EmbeddingScorer,
    GroundingRail,
)
from services.guardrails.settings import GuardrailsSettings
from shared.errors import FailedPrecondition
from shared.models.cross_encoder import OnnxCrossEncoder, newest_reranker
from shared.models.gates import reranker_gate

log = logging.getLogger(__name__)
RERANKER_MODELS = Path("models") / "reranker"


def good_reranker(setting: str) -> tuple[Path | None, str]:
    """(model dir, why) for the cross-encoder scorer: the configured one, else the newest
    trained reranker whose own evaluation beats BM25 (one that ranks worse would judge
    support no better), with an ONNX file the onnx pipeline loads."""
    if setting:
        return Path(setting), "configured"
    found = newest_reranker("model.onnx", str(Path.cwd() / RERANKER_MODELS))
    if found is None:
        return None, f"no trained reranker with model.onnx under {RERANKER_MODELS}"
    gate = reranker_gate(found)
    if not gate.evaluated:
        return None, f"{found} has no evaluation in metrics.json"
    if not gate.passed:
        return None, f"{found} ranks worse than BM25 (nDCG@10 {gate.ndcg:.3f} vs {gate.bm25:.3f})"
    return found, "newest trained reranker"


def grounding_scorer(
    grounding: GroundingSettings, settings: GuardrailsSettings, embed: Embed
) -> tuple[Any, float]:
    wanted = grounding.scorer
    if wanted in ("auto", "cross-encoder"):
        path, why = good_reranker(settings.grounding_model)
        if path is not None:
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
            return scorer, grounding.cross_encoder_threshold
        if wanted == "cross-encoder":
            raise FailedPrecondition(
                f"grounding scorer cross-encoder: {why}; set RAGRAIL_GUARDRAILS_GROUNDING_MODEL "
                "or use scorer: embedding"
            )
        log.info("grounding scorer: embedding similarity", extra={"why_not_cross_encoder": why})
    return EmbeddingScorer(embed), grounding.embedding_threshold


def load(settings: GroundingSettings, resources: Resources) -> LoadedRail:
    # The general encoder uncached: context windows rarely repeat, and a cache would flatter
    # the latency.
    scorer, threshold = grounding_scorer(settings, resources.settings, resources.embed_general)
    rail = GroundingRail(
        scorer,
        threshold,
        settings.min_supported,
        settings.action,
        settings.window_chars,
        settings.candidates,
    )

    async def ragrail_grounding(
        text: str, passages: list[str] | None = None, grounded: bool = False
    ) -> dict[str, Any]:
        if grounded:
            # The caller checked every sentence against this context (the gateway's grounding,
            # chat/grounding.py): its result stands, and grounding is computed once per answer.
            caller = Outcome(reason="grounded by the caller", details={"grounded": "caller"})
            return await guarded("grounding", settings.on_error, lambda: caller, inline=True)
        context = [str(p) for p in passages or []]
        return await guarded("grounding", settings.on_error, lambda: rail.check(text, context))

    return LoadedRail(
        {"ragrail_grounding": ragrail_grounding},
        info={
            "grounding_scorer": scorer.name,
            "grounding_model": getattr(scorer, "model_name", "embedding"),
        },
    )
