"""The model-runtime layer: how ragrail finds, loads and runs its models.

Services, trainers and benchmarks import models from here, never from another service:

- `registry`: the registry layout (`models/<role>/<name>/<version>/` + manifest.json) and
  discovery of the newest version of a role;
- `runtime`: onnxruntime sessions (threads, spinning) and the small file checks every
  ONNX model shares;
- `encoder`: sentence encoders (sentence-transformers on PyTorch, or ONNX);
- `cross_encoder`: cross-encoder rerankers (PyTorch or ONNX) and how the reranker's model
  is found;
- `classifier`: sequence classifiers (an ONNX encoder with a linear head) and how the
  prompt-injection classifier is found;
- `gates`: quality gates read from a model's own evaluation (its manifest's metrics);
- `generator_files`: where the generator's model files come from (packaged GGUF, a path);
- `settings`, `service`: what the embedder and reranker services share (settings, servicer);
- `quantize`: ONNX export and INT8 quantization helpers both quantizers use.

Heavy packages (torch, onnxruntime, transformers) are imported where a model is loaded, so
importing this layer costs little.
"""
