"""Guardrails service: input, retrieval and output rails on NeMo Guardrails, offline."""
