"""python -m trainers.guardrails.baseline --data DIR: the single-head prompt-injection
classifier (train.py)."""

from trainers.guardrails.baseline.train import main

if __name__ == "__main__":
    raise SystemExit(main())
