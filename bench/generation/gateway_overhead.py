"""`--engines openai-gateway`: the gateway's time-to-first-token overhead over the openai-engine
generator read directly over gRPC (issue 27's target: <= 50 ms)."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from rich.table import Table

from bench.generation import console
from bench.generation.http_paths import Gateway, forget_prompt, llama_server
from bench.generation.openai_engine import REMOTE_LABEL
from bench.generation.prompts import parity_chats
from bench.generation.runs import PathResult, Run
from bench.generation.service import Service, service_run


def bench_openai_gateway(args: argparse.Namespace) -> tuple[PathResult, PathResult, str]:
    """The gateway's TTFT overhead alone: llama_cpp.server, an openai generator and a gateway
    in front of it; (the generator over gRPC, the gateway, how they were asked)."""
    with tempfile.TemporaryDirectory(prefix="ragrail-bench-gateway-") as tmp:
        server = llama_server(args, Path(tmp))
        console.print(
            "[bold]openai-gateway[/bold]: starting llama_cpp.server, a generator and a gateway"
        )
        server.start()
        remote = Service(
            {
                "RAGRAIL_GENERATOR_ENGINE": "openai",
                "RAGRAIL_GENERATOR_REMOTE_URL": server.url,
                "RAGRAIL_GENERATOR_TOKENIZER": str(server.gguf),
                "RAGRAIL_GENERATOR_CONTEXT_LENGTH": str(args.context),
            },
            Path(tmp) / "openai.log",
        )
        gateway = Gateway(remote.target, Path(tmp) / "gateway.log")
        try:
            asyncio.run(remote.wait())
            gateway.wait()
            grpc_path, gateway_path = PathResult(REMOTE_LABEL), PathResult(gateway.label)
            asyncio.run(service_run(remote, "", "Say hello.", 4))
            gateway.run("", "Say hello.", 4)
            for i, (system, question) in enumerate(parity_chats(), 1):
                # The server reads the prompt once, unmeasured; every measured request then
                # finds it in the server's cache, so TTFT is the path and one decoding step,
                # not a prefill whose time swings with the machine's load.
                forget_prompt(server.url)
                asyncio.run(service_run(remote, system, question, 1))
                diffs = []
                for r in range(args.rounds):

                    def by_grpc(s: str = system, q: str = question) -> Run:
                        return asyncio.run(service_run(remote, s, q, args.max_tokens))

                    def by_gateway(s: str = system, q: str = question) -> Run:
                        return gateway.run(s, q, args.max_tokens)

                    # Taking turns, and which goes first alternates.
                    if (i + r) % 2:
                        b, a = by_gateway(), by_grpc()
                    else:
                        a, b = by_grpc(), by_gateway()
                    grpc_path.runs.append(a)
                    gateway_path.runs.append(b)
                    diffs.append((b.ttft - a.ttft) * 1000)
                console.print(
                    f"  {i:2d}: TTFT gRPC {a.ttft * 1000:.0f} ms, gateway {b.ttft * 1000:.0f} ms;"
                    f" overhead median of {args.rounds}: {statistics.median(diffs):+.1f} ms"
                )
            how = (
                f"{len(parity_chats())} chats x {args.rounds} rounds, each prompt cached by the "
                "server, paths taking turns"
            )
            return grpc_path, gateway_path, how
        finally:
            gateway.stop()
            remote.stop()
            server.stop()


def gateway_table(
    direct: PathResult, gateway: PathResult, how: str, args: argparse.Namespace
) -> Table:
    """The gateway's time-to-first-token overhead over the generator read over gRPC."""
    n = len(direct.runs)
    table = Table(
        title=f"Gateway TTFT overhead, openai engine: {how}; greedy, up to {args.max_tokens} "
        "tokens each"
    )
    columns = ("path", "TTFT p50 ms", "TTFT mean ms", "overhead p50 ms", "overhead mean ms",
               "TTFT ratio", "same text")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="right")
    pairs = list(zip(direct.runs, gateway.runs, strict=True))
    diffs = [(b.ttft - a.ttft) * 1000 for a, b in pairs]
    same = sum(a.text == b.text for a, b in pairs)
    mean = statistics.mean(r.ttft for r in direct.runs) * 1000
    table.add_row(direct.label, f"{direct.ttft_ms:.0f}", f"{mean:.0f}", "", "", "1.00", "")
    gmean = statistics.mean(r.ttft for r in gateway.runs) * 1000
    table.add_row(
        gateway.label,
        f"{gateway.ttft_ms:.0f}",
        f"{gmean:.0f}",
        f"{statistics.median(diffs):+.1f}",
        f"{statistics.mean(diffs):+.1f}",
        f"{gateway.ttft_ms / direct.ttft_ms:.2f}",
        f"{same}/{n}",
    )
    table.caption = (
        f"overhead: gateway TTFT minus gRPC TTFT of the same chat, asked one after the other "
        f"(p50 and mean of the {n} differences); TTFT to the first piece of text, the "
        "gateway's read from its SSE stream (HTTP, the chat's checks and prompt fitting, then "
        "the same gRPC call). With every prompt read whole, prefill time swings with the load "
        "and buries the difference; --engines openai-gateway asks each prompt cached (where "
        "same text can then differ: a cached prompt's shorter pass takes another flash-"
        "attention kernel, see forget_prompt). Target (issue 27): <= 50 ms."
    )
    return table
