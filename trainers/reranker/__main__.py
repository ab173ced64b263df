"""python -m trainers.reranker: fine-tune a cross-encoder reranker (see train.py)."""

from trainers.reranker.train import main

if __name__ == "__main__":
    raise SystemExit(main())
