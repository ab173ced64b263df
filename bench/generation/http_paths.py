"""The HTTP paths of the openai-engine runs: llama-cpp-python's server read directly, and the
gateway as a process, each read over SSE as an OpenAI client would."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from bench.common import free_port, spawn, stop
from bench.generation.runs import Run


def forget_prompt(url: str) -> None:
    """Makes llama-cpp-python's server read the next prompt whole. It keeps the last prompt's
    KV cache and reads only what a new prompt adds to their common prefix; that shorter pass
    takes another of llama.cpp's flash-attention kernels (see backends/llamacpp.py) and can
    change a greedy answer. A one-token completion of an unrelated prompt leaves no prefix."""
    import httpx

    body = {"prompt": "x", "max_tokens": 1, "temperature": 0.0}
    httpx.post(f"{url}/completions", json=body, timeout=60).raise_for_status()


class DirectServer:
    """llama-cpp-python's server read straight over HTTP (SSE), as an OpenAI client would."""

    label = "llama_cpp.server direct: /v1/chat/completions (SSE)"

    def __init__(self, url: str) -> None:
        import httpx

        self.url = url
        self.client = httpx.Client(timeout=600)

    def run(self, system: str, question: str, max_tokens: int) -> Run:
        import json

        messages = [{"role": "user", "content": question}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        # The openai engine's sampling fields (the server's own defaults are not greedy).
        body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0.0,
                "top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0, "stream": True}  # fmt: skip
        started = time.perf_counter()
        first = None
        parts: list[str] = []
        with self.client.stream("POST", f"{self.url}/chat/completions", json=body) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                delta = json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                if delta:
                    first = first or time.perf_counter()
                    parts.append(delta)
        end = time.perf_counter()
        # A piece per token, as the openai engine counts them.
        return Run((first or end) - started, end - started, len(parts), "".join(parts))


class Gateway:
    """The gateway as a process, in front of one generator (no other service: plain chat needs
    none), read over its OpenAI-compatible streaming chat, as an OpenAI client would."""

    label = "gateway /v1/chat/completions (SSE) -> openai engine"

    def __init__(self, generator: str, log: Path) -> None:
        import httpx

        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
        env.update(
            HF_HUB_OFFLINE="1",
            RAGRAIL_GATEWAY_PORT=str(self.port),
            RAGRAIL_GATEWAY_GENERATOR_URL=generator,
        )
        self.log = log
        self.process = spawn("services.gateway", env, log)
        self.url = f"http://127.0.0.1:{self.port}"
        # A connection per request, as the gRPC side opens a channel per request.
        self.client = httpx.Client(timeout=600, limits=httpx.Limits(max_keepalive_connections=0))

    def wait(self, timeout: float = 120) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"gateway exited; log:\n{self.log.read_text()[-3000:]}")
            try:  # any answer will do: its health says degraded without an embedder
                httpx.get(f"{self.url}/v1/health", timeout=5)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise SystemExit(f"gateway not answering after {timeout} s; see {self.log}")

    def run(self, system: str, question: str, max_tokens: int) -> Run:
        import json

        messages = [{"role": "user", "content": question}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        body = {"model": "any", "messages": messages, "max_tokens": max_tokens,
                "temperature": 0.0, "seed": 0, "stream": True,
                "stream_options": {"include_usage": True}}  # fmt: skip
        started = time.perf_counter()
        first = None
        parts: list[str] = []
        tokens = 0
        with self.client.stream("POST", f"{self.url}/v1/chat/completions", json=body) as reply:
            reply.raise_for_status()
            for line in reply.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    raise SystemExit(f"the gateway's stream failed: {event['error']}")
                for choice in event.get("choices") or []:
                    delta = (choice.get("delta") or {}).get("content") or ""
                    if delta:
                        first = first or time.perf_counter()
                        parts.append(delta)
                if event.get("usage"):
                    tokens = int(event["usage"].get("completion_tokens") or 0)
        end = time.perf_counter()
        return Run((first or end) - started, end - started, tokens, "".join(parts))

    def stop(self) -> None:
        self.client.close()
        stop(self.process)


def llama_server(args: argparse.Namespace, tmp: Path) -> Any:
    """llama-cpp-python's server (tests/generator/openai_peer.py's LlamaServer, one slot) on
    the run's GGUF, context and threads, its log in `tmp`; not started yet."""
    from shared.models.generator_files import configured_model
    from tests.generator.openai_peer import LlamaServer, server_missing

    missing = server_missing()
    if missing:
        raise SystemExit(missing)
    gguf = configured_model(args.gguf)
    return LlamaServer(gguf, tmp / "llama-server.log", n_ctx=args.context, threads=args.threads)
