"""python -m trainers.guardrails: train the prompt-injection classifier (see train.py)."""

from trainers.guardrails.train import main

if __name__ == "__main__":
    raise SystemExit(main())
