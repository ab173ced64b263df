"""python -m trainers.guardrails: the guard model (injection, content safety, planted
instructions; guard.py). The single-head classifier kept as the benchmark's baseline is
`python -m trainers.guardrails.baseline` (baseline/train.py)."""

from trainers.guardrails.guard import main

if __name__ == "__main__":
    raise SystemExit(main())
