"""Extractive reader training: MiniLM fine-tuned for span extraction, exported to INT8 ONNX."""
