"""Embedder service: turns texts into normalised dense vectors (sentence-transformers)."""
