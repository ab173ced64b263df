"""Reranker service: scores passages against a query with a cross-encoder and orders them."""
