"""The models `ragrail up` looks for before it starts or trains anything: the guard model,
the extractive reader, and where a first start's training writes them."""

from __future__ import annotations

from pathlib import Path

from shared.errors import FailedPrecondition
from shared.models import registry
from shared.models.classifier import find_injection_model
from shared.models.guard import GUARD_ROLE, find_guard_model, newest_guard_model
from shared.models.reader import ROLE as READER_ROLE
from shared.models.settings import GuardrailsChoice, ReaderChoice


def guard_model_problem() -> str:
    """Why the configured guard model or injection classifier cannot load ("" when none is
    configured or it exists): a model the user named must not be replaced by pending rails.
    The service's own lookups decide, so both agree (an injection classifier, when set, is
    what the service loads)."""
    choice = GuardrailsChoice()
    try:
        if choice.injection_model:
            find_injection_model(choice.injection_model)
        elif choice.guard_model:
            find_guard_model(choice.guard_model)
    except FailedPrecondition as exc:
        setting = "INJECTION_MODEL" if choice.injection_model else "GUARD_MODEL"
        return f"RAGRAIL_GUARDRAILS_{setting}: {exc.message}"
    return ""


def needs_guard_training() -> bool:
    """No guard model is configured and none is trained where the service looks for one."""
    choice = GuardrailsChoice()
    if choice.guard_model or choice.injection_model:
        return False
    return newest_guard_model() is None


def guard_model_out() -> Path:
    """Where the first start's training writes: the newest guard model the service finds."""
    return Path.cwd() / registry.models_root() / GUARD_ROLE / "guard-minilm" / "v1"


def needs_reader_training() -> bool:
    """No reader is configured (a name, or "none") and none is trained where the gateway looks."""
    if ReaderChoice().chat_reader_model:
        return False
    return not registry.entries(READER_ROLE)


def reader_in_use() -> str:
    """The reader the gateway answers with: the one configured, else the newest under
    models/reader/ ("" when none; "none" when turned off)."""
    configured = ReaderChoice().chat_reader_model
    if configured:
        return configured
    found = registry.entries(READER_ROLE)
    return str(found[-1].path) if found else ""


def reader_out() -> Path:
    """Where the first start's reader training writes: the newest reader the gateway finds."""
    return Path.cwd() / registry.models_root() / READER_ROLE / "minilm-covidqa" / "v1"
