"""Retriever service: stores chunks and answers dense, sparse and hybrid searches."""
