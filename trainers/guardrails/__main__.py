"""python -m trainers.guardrails --all: the guard model (injection, content safety, planted
instructions; trainers/guardrails/guard.py). With --data DIR and no --all: the single-head
prompt-injection classifier of train.py (the v3 recipe, kept as the benchmark's baseline)."""

import sys

if __name__ == "__main__":
    if "--all" in sys.argv[1:] or "--data" not in " ".join(sys.argv[1:]).split():
        from trainers.guardrails.guard import main
    else:
        from trainers.guardrails.train import main
    raise SystemExit(main())
