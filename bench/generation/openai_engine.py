"""`--engines openai`: llama_cpp.server behind an openai-engine generator, beside the same model
in process, the server read directly and a gateway in front; 20 chats taking turns."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from bench.generation import console
from bench.generation.http_paths import DirectServer, Gateway, forget_prompt, llama_server
from bench.generation.prompts import parity_chats
from bench.generation.runs import PathResult, Run
from bench.generation.service import Service, service_run


@dataclass
class OpenAIResult:
    local: PathResult
    remote: PathResult
    direct: PathResult
    gateway: PathResult


def bench_openai(args: argparse.Namespace) -> OpenAIResult:
    common = {
        "RAGRAIL_GENERATOR_THREADS": str(args.threads),
        "RAGRAIL_GENERATOR_CONTEXT_LENGTH": str(args.context),
        "RAGRAIL_GENERATOR_MAX_BATCH_SIZE": "1",  # the server has one slot too
        "RAGRAIL_GENERATOR_KV_CACHE_TOKENS": str(args.context),
    }
    # Every prompt read whole, as the server is made to (forget_prompt).
    local_env = {**common, "RAGRAIL_GENERATOR_ENGINE": "llamacpp",
                 "RAGRAIL_GENERATOR_PREFIX_CACHE": "false"}  # fmt: skip
    if args.gguf:
        local_env["RAGRAIL_GENERATOR_MODEL"] = args.gguf
    with tempfile.TemporaryDirectory(prefix="ragrail-bench-openai-") as tmp:
        server = llama_server(args, Path(tmp))
        console.print(
            "[bold]openai[/bold]: starting llama_cpp.server, two generators and a gateway"
        )
        server.start()
        remote_env = {
            **common,
            "RAGRAIL_GENERATOR_ENGINE": "openai",
            "RAGRAIL_GENERATOR_REMOTE_URL": server.url,
            "RAGRAIL_GENERATOR_TOKENIZER": str(server.gguf),
        }
        local = Service(local_env, Path(tmp) / "llamacpp.log")
        remote = Service(remote_env, Path(tmp) / "openai.log")
        gateway = Gateway(remote.target, Path(tmp) / "gateway.log")
        try:
            asyncio.run(local.wait())
            asyncio.run(remote.wait())
            gateway.wait()
            return measure_openai(local, remote, gateway, server.url, args)
        finally:
            gateway.stop()
            local.stop()
            remote.stop()
            server.stop()


REMOTE_LABEL = "service, openai engine -> llama_cpp.server: gRPC GenerateStream"


def measure_openai(
    local: Service, remote: Service, gateway: Gateway, url: str, args: argparse.Namespace
) -> OpenAIResult:
    direct = DirectServer(url)
    result = OpenAIResult(
        PathResult("service, llamacpp engine (in process): gRPC GenerateStream"),
        PathResult(REMOTE_LABEL),
        PathResult(direct.label),
        PathResult(gateway.label),
    )

    # Warm-up on a question not measured (first calls size buffers, read the template).
    for service in (local, remote):
        asyncio.run(service_run(service, "", "Say hello.", 4))
    gateway.run("", "Say hello.", 4)
    forget_prompt(url)
    tokens = args.max_tokens
    for i, (system, question) in enumerate(parity_chats(), 1):
        # Taking turns, so both paths see the same machine load.
        result.local.runs.append(asyncio.run(service_run(local, system, question, tokens)))
        forget_prompt(url)
        result.remote.runs.append(asyncio.run(service_run(remote, system, question, tokens)))
        forget_prompt(url)
        result.direct.runs.append(direct.run(system, question, tokens))
        forget_prompt(url)
        result.gateway.runs.append(gateway.run(system, question, tokens))
        a, b = result.local.runs[-1], result.remote.runs[-1]
        same = a.text == b.text and a.tokens == b.tokens
        console.print(
            f"  {i:2d}: {b.tokens} tokens, openai {b.tokens / b.total:.1f} tok/s, in process "
            f"{a.tokens / a.total:.1f} tok/s, {'same' if same else 'DIFFERENT'}"
        )
    return result


def openai_table(r: OpenAIResult, args: argparse.Namespace) -> Table:
    n = len(r.local.runs)
    table = Table(
        title=f"openai engine vs in-process llamacpp: {n} chat requests, greedy, up to "
        f"{args.max_tokens} tokens each, {args.threads} thread(s)"
    )
    columns = ("path", "TTFT p50 ms", "TTFT vs in process", "tokens/s", "decode tokens/s",
               "decode vs in process", "same tokens")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="right")

    def same(runs: list[Run]) -> str:
        pairs = zip(r.local.runs, runs, strict=True)
        return f"{sum(a.text == b.text and a.tokens == b.tokens for a, b in pairs)}/{n}"

    rows = ((r.local, ""), (r.remote, same(r.remote.runs)), (r.direct, same(r.direct.runs)),
            (r.gateway, same(r.gateway.runs)))  # fmt: skip
    for path, served in rows:
        table.add_row(
            path.label,
            f"{path.ttft_ms:.0f}",
            f"{path.ttft_ms - r.local.ttft_ms:+.0f} ms",
            f"{path.tokens_per_s:.1f}",
            f"{path.decode_per_s:.1f}",
            f"{path.decode_per_s / r.local.decode_per_s:.2f}",
            served,
        )
    table.caption = (
        "same tokens: the answer's text and token count equal the in-process engine's. Every "
        "prompt is read whole: left to itself llama-cpp-python's server reads only what a "
        "prompt adds to the last one's, in a shorter pass whose flash-attention kernel can "
        "change a greedy answer (6 of these 20 did, in a run without clearing). Target: "
        "decode >= 0.9 x in process, 20/20 the same."
    )
    return table
