"""python -m trainers.embedder: fine-tune the MiniLM embedder (see train.py)."""

from trainers.embedder.train import main

if __name__ == "__main__":
    raise SystemExit(main())
