"""Guardrails settings: RAGRAIL_GUARDRAILS_* environment variables or the `guardrails:` YAML
section. What the rails do is the NeMo Guardrails config directory (config/config.yml)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from shared.settings import ServiceSettings

PACKAGED_CONFIG = Path(__file__).resolve().parent / "config"


class GuardrailsSettings(ServiceSettings.of("guardrails")):
    config_dir: str = Field(
        "",
        description="NeMo Guardrails configuration directory (config.yml, prompts.yml, Colang "
        "files of your own); empty uses services/guardrails/config.",
    )
    engine: Literal["nemo", "direct"] = Field(
        "nemo",
        description="nemo: every check runs through NeMo Guardrails' LLMRails and its "
        "activated-rails log; direct: the same rails from the same config, called in order "
        "without LLMRails (faster; NeMo-only flows are refused at startup).",
    )
    colang_speedups: bool = Field(
        True,
        description="engine nemo: replay Colang events incrementally, cache parsed Colang "
        "expressions and compiled YARA rules (services/guardrails/colang.py; same results, "
        "measured faster); false runs NeMo Guardrails' runtime as shipped.",
    )
    guard_model: str = Field(
        "",
        description="Guard model directory (injection, content-safety and document-injection "
        "heads; written by `python -m trainers.guardrails --all`); empty loads the newest "
        "under models/guardrails/, else the injection classifier below, else the guard model "
        "published in published/guardrails/.",
    )
    injection_model: str = Field(
        "",
        description="Prompt-injection classifier directory (written by `python -m "
        "trainers.guardrails`); empty loads the newest under models/guardrails/.",
    )
    grounding_model: str = Field(
        "",
        description="Cross-encoder directory for the groundedness rail; empty uses the newest "
        "trained reranker under models/reranker/ that beats BM25 in its metrics.json, else "
        "embedding similarity.",
    )
    threads: int = Field(
        0, ge=0, description="onnxruntime intra-op threads per model; 0 uses all cores."
    )
    max_messages: int = Field(200, ge=1, description="Most chat messages in one request.")
    max_chunks: int = Field(
        100, ge=1, description="Most chunks or context passages in one request."
    )
    max_text_chars: int = Field(
        100_000, ge=1, description="Longest message, answer or chunk accepted."
    )

    def config_path(self) -> Path:
        return Path(self.config_dir).expanduser() if self.config_dir else PACKAGED_CONFIG
