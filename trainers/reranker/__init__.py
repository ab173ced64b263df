"""Cross-encoder reranker fine-tuning on BEIR data: `python -m trainers.reranker --help`."""
