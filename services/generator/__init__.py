"""Generator service: streams chat answers from an LLM engine (llama.cpp, PyTorch; Triton next)."""
