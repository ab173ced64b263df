"""The guardrails service's classifiers. They live in the model layer
(shared/models/classifier.py), which the trainers and benchmarks load them with too; this
module names what the rails use."""

from __future__ import annotations

from shared.models.classifier import (
    HEAD_FILE,
    InjectionClassifier,
    SequenceClassifier,
    load_encoder,
)
from shared.models.classifier import find_injection_model as resolve_injection_model

__all__ = [
    "HEAD_FILE",
    "InjectionClassifier",
    "SequenceClassifier",
    "load_encoder",
    "resolve_injection_model",
]
