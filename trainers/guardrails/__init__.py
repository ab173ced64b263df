"""Prompt-injection classifier for the guardrails service: `python -m trainers.guardrails`."""
