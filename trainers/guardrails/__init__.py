"""Guardrail classifiers: the guard model every rail runs on (`python -m trainers.guardrails`,
guard.py) and the single-head prompt-injection classifier kept as its baseline
(`python -m trainers.guardrails.baseline`, baseline/)."""
