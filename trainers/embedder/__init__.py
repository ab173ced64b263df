"""Fine-tune the embedder (see train.py)."""
