"""Grounded chat, split as vLLM splits its OpenAI entrypoints:

- protocol.py: the request's options decided once, the state the stages share, their results;
- stages/: one module per stage (rails, retrieve, prompt, generate);
- serving.py: the stages in order, and the answer whole or streamed (responses.py);
- metrics.py: Prometheus metrics and the log line of a chat.
"""
