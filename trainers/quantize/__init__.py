"""Post-training quantization recipes: `python -m trainers.quantize <target>` (see embedder.py)."""
