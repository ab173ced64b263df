"""The tokenize endpoints the openai engine knows, one per kind of server: where each is and
the body it takes, and how to tell its answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROBE_TEXT = "Hello, world"


@dataclass(frozen=True)
class TokenizeRoute:
    """A server's tokenize endpoint: its path (from the host's root) and request shape.

    llama-cpp-python: POST /extras/tokenize {"input"} -> {"tokens"}, special tokens parsed.
    llama.cpp's llama-server: POST /tokenize {"content", "add_special", "parse_special"} ->
    {"tokens"}; POST /apply-template {"messages"} -> {"prompt"} renders with its template.
    vLLM: POST /tokenize {"model", "prompt" | "messages", "add_special_tokens"} -> {"tokens",
    "count", "max_model_len"}; with messages it applies the served model's chat template."""

    name: str
    path: str

    def body(self, model: str, text: str, chat: bool) -> dict[str, Any]:
        if self.name == "llama-cpp-python":
            return {"input": text, "model": model or None}
        if self.name == "llama.cpp":
            return {"content": text, "add_special": False, "parse_special": chat}
        return {"model": model, "prompt": text, "add_special_tokens": False}

    def accepts(self, reply: Any) -> bool:
        """Whether `reply` to PROBE_TEXT is this route's answer (llama.cpp answers {"tokens":
        []} to a body without "content", so an empty list proves nothing)."""
        tokens = reply.get("tokens") if isinstance(reply, dict) else None
        ok = isinstance(tokens, list) and bool(tokens) and all(isinstance(t, int) for t in tokens)
        return ok and (self.name != "vllm" or "count" in reply)


ROUTES = (
    TokenizeRoute("llama-cpp-python", "/extras/tokenize"),
    TokenizeRoute("llama.cpp", "/tokenize"),
    TokenizeRoute("vllm", "/tokenize"),
)
