"""/v1/chat/completions (grounded chat), /v1/embeddings and /v1/models, split as vLLM splits
its OpenAI entrypoints:

- router.py: the routes (authorization, then the serving layer);
- protocol.py: OpenAI's request and response bodies, with ragrail's extra fields;
- serving.py: the stages in order, the answer whole or streamed as server-sent events
  (responses.py), cancellation when the client leaves and the accounting of failed chats;
- state.py: the request's options decided once, the state the stages share, their results;
- stages/: one module per stage (rails, retrieve, evidence, prompt, generate, answer);
- grounding.py: evidence selection and the alignment of an answer with its sources;
- metrics.py: Prometheus metrics and the log line of a chat.
"""
