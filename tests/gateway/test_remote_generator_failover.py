"""The remote model server killed under 4 streaming chats through the gateway, then restarted
(issue 27, "Kill and recover").

Real processes, no mock: llama-cpp-python's server (`python -m llama_cpp.server`, see
tests/generator/openai_peer.py) on the packaged SmolLM2 GGUF, a generator with
RAGRAIL_GENERATOR_ENGINE=openai in front of it, and a gateway in front of that. That server
answers one request at a time (`--interrupt_requests false`: the others wait for its lock), so
when it is SIGKILLed one chat is mid-stream and three are waiting for their first token.

Each chat must end, within a bound, in one of two clean ways: an SSE error event (the stream
had started) or an HTTP 503 (it had not), both naming the model server's URL; no 500, in a
reply or in the gateway's failure counter. Once the server answers again on the same port, a
new chat through the gateway succeeds within 10 s."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from shared.models.generator_files import packaged_gguf
from tests.conftest import gateway_process, grpc_service
from tests.generator.openai_peer import MODEL_ALIAS, LlamaServer, llama_server, server_missing

pytestmark = pytest.mark.integration

CONTEXT = 1024
CLIENTS = 4
# Greedy, the packaged model answers this for hundreds of tokens: seconds of streaming, so the
# first chat is mid-answer and the other three are still queued when the server dies.
LONG = "Count from 1 to 300, separated by commas."
# From the kill. The queued chats take longest: the generator retries the dead server twice
# (0.2 s, 0.4 s) and the gateway's gRPC channel retries the generator's UNAVAILABLE (up to 4
# attempts with backoff), about 6.5 s in all here.
STREAM_ENDS_WITHIN_S = 20.0
RECOVERS_WITHIN_S = 10.0


@dataclass
class Chat:
    """What one streaming client saw."""

    status: int = 0
    body: str = ""  # a refused request's body
    lines: list[str] = field(default_factory=list)  # `data:` payloads, in order
    pieces: int = 0  # content deltas
    ended_s: float = 0.0  # monotonic time it ended


def chat_body(content: str, max_tokens: int) -> dict:
    return {"model": "any", "messages": [{"role": "user", "content": content}],
            "max_tokens": max_tokens, "temperature": 0, "stream": True}  # fmt: skip


async def stream_chat(client: httpx.AsyncClient, url: str, chat: Chat, started: asyncio.Event,
                      max_tokens: int = 900) -> None:  # fmt: skip
    async with client.stream(
        "POST", f"{url}/v1/chat/completions", json=chat_body(LONG, max_tokens)
    ) as reply:
        chat.status = reply.status_code
        if reply.status_code != 200:
            chat.body = (await reply.aread()).decode(errors="replace")
        else:
            async for line in reply.aiter_lines():
                if not line.startswith("data: "):
                    continue
                chat.lines.append(line[6:])
                if line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if any((c.get("delta") or {}).get("content") for c in event.get("choices", [])):
                    chat.pieces += 1
                    if chat.pieces >= 3:
                        started.set()
    chat.ended_s = time.monotonic()


async def short_chat(url: str) -> Chat:
    chat = Chat()
    async with httpx.AsyncClient(timeout=30) as client:
        await stream_chat(client, url, chat, asyncio.Event(), max_tokens=8)
    return chat


def failures(url: str, status: str) -> float:
    """The gateway's ragrail_http_failures_total for one status."""
    total = 0.0
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("ragrail_http_failures_total{") and f'status="{status}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


@dataclass
class Stack:
    server: LlamaServer
    gateway: str
    gateway_log: Path
    generator_log: Path


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    missing = server_missing()
    if missing:
        pytest.skip(missing)
    gguf = packaged_gguf()
    generator_env = {
        "RAGRAIL_GENERATOR_ENGINE": "openai",
        "RAGRAIL_GENERATOR_TOKENIZER": str(gguf),
        "RAGRAIL_GENERATOR_CONTEXT_LENGTH": str(CONTEXT),
        # Known without asking the server, so the generator serves errors while it is down.
        "RAGRAIL_GENERATOR_REMOTE_MODEL": MODEL_ALIAS,
        "RAGRAIL_GENERATOR_REMOTE_RETRIES": "2",
        "RAGRAIL_GENERATOR_REMOTE_RETRY_BACKOFF_S": "0.2",
    }
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(llama_server(gguf, tmp_path / "server.log", n_ctx=CONTEXT))
        generator_env["RAGRAIL_GENERATOR_REMOTE_URL"] = server.url
        generator = stack.enter_context(
            grpc_service("services.generator", "GENERATOR", generator_env, tmp_path / "gen.log")
        )
        log = tmp_path / "gateway.log"
        # Plain chat only: no collection, so no embedder or retriever is asked; no rails.
        gateway = stack.enter_context(
            gateway_process(log, generator_url=generator, guardrails_url="")
        )
        yield Stack(server, gateway, log, tmp_path / "gen.log")


def test_model_server_killed_under_four_streams_then_recovers(stack: Stack) -> None:
    server, url = stack.server, stack.gateway
    chats = [Chat() for _ in range(CLIENTS)]

    async def run() -> float:
        started = asyncio.Event()
        timeout = httpx.Timeout(60, connect=10)
        async with httpx.AsyncClient(timeout=timeout) as client:
            tasks = [asyncio.create_task(stream_chat(client, url, c, started)) for c in chats]
            await asyncio.wait_for(started.wait(), 30)  # one chat is mid-answer
            killed = time.monotonic()
            await asyncio.to_thread(server.kill)
            done, pending = await asyncio.wait(tasks, timeout=STREAM_ENDS_WITHIN_S)
            for task in pending:
                task.cancel()
            assert not pending, (
                f"{len(pending)} stream(s) still open {STREAM_ENDS_WITHIN_S} s after the kill"
            )
            for task in done:
                task.result()  # a client-side error (a dropped connection) fails here
            return killed

    killed = asyncio.run(run())
    log = stack.gateway_log.read_text(errors="replace")
    streamed = refused = 0
    for i, chat in enumerate(chats):
        what = f"chat {i}: status {chat.status}, body {chat.body[:300]!r}, last {chat.lines[-2:]}"
        assert chat.status in (200, 503), what
        if chat.status == 503:
            refused += 1
            error = json.loads(chat.body)["error"]
            assert server.url in error["message"], what
            assert error["type"] == "Unavailable", what
        else:
            streamed += 1
            assert chat.lines and chat.lines[-1] != "[DONE]", what  # it did not end as answered
            last = json.loads(chat.lines[-1])
            assert set(last) == {"error"}, what
            assert server.url in last["error"]["message"], what
            assert "Traceback" not in last["error"]["message"], what
        print(f"chat {i}: {chat.status}, {chat.pieces} pieces, ended "
              f"{chat.ended_s - killed:.2f} s after the kill")  # fmt: skip
    assert streamed >= 1, "no chat was streaming when the server died"
    assert failures(url, "500") == 0
    assert "unhandled error" not in log and "Traceback" not in log, log[-3000:]
    generator_log = stack.generator_log.read_text(errors="replace")
    assert "Traceback" not in generator_log, generator_log[-3000:]

    # Back on the same port: a new chat answers within 10 s of the server answering.
    server.start()
    back = time.monotonic()
    answered = None
    while time.monotonic() - back < RECOVERS_WITHIN_S:
        chat = asyncio.run(short_chat(url))
        if chat.status == 200 and chat.lines[-1:] == ["[DONE]"] and chat.pieces:
            answered = time.monotonic() - back
            break
        assert chat.status in (200, 503), (chat.status, chat.body)
        time.sleep(0.2)
    assert answered is not None, f"no chat answered within {RECOVERS_WITHIN_S} s of the restart"
    print(f"{streamed} streams ended with an error event, {refused} refused with 503; "
          f"recovered {answered:.2f} s after the server was back")  # fmt: skip
    assert failures(url, "500") == 0
