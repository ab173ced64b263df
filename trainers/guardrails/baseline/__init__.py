"""The single-head prompt-injection classifier (the v3 recipe), kept as the baseline that
bench/guardrails.py measures the guard model against; the guardrails service still loads such
a classifier when no guard model is there. `python -m trainers.guardrails.baseline --data DIR`
(train.py); the guard model is `python -m trainers.guardrails` (guard.py)."""
