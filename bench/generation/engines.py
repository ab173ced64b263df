"""The in-process engines (llamacpp, torch): the service against its raw library, one stream
at a time, then N clients at once; and their tables."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from rich.table import Table

from bench.generation import console
from bench.generation.prompts import PROMPTS, WORKLOADS
from bench.generation.raw import RawLlamaCpp, RawTransformers
from bench.generation.runs import Level, PathResult, Run
from bench.generation.service import Service, clients, stream_one
from shared.proto.ragrail.v1 import generator_pb2_grpc


def concurrency_levels(
    service: Service, args: argparse.Namespace
) -> dict[tuple[str, int, int], Level]:
    """(workload, max_tokens, clients) -> Level, over alternating rounds: in each round every
    client count answers the same questions, so load on the machine falls on all alike."""
    questions = [PROMPTS[i % len(PROMPTS)] for i in range(max(args.concurrency))]
    levels: dict[tuple[str, int, int], Level] = {}
    for workload, system in WORKLOADS.items():
        for max_tokens in args.concurrent_max_tokens:
            # Warm-up: the first answers of a workload pay for reading its prompts once.
            asyncio.run(clients(service.target, max(args.concurrency), questions, 4, system))
            for _ in range(args.rounds):
                for n in args.concurrency:
                    wall, runs = asyncio.run(
                        clients(service.target, n, questions, max_tokens, system)
                    )
                    level = levels.setdefault((workload, max_tokens, n), Level())
                    level.runs.extend(runs)
                    level.wall += wall
            for n in args.concurrency:
                level = levels[(workload, max_tokens, n)]
                console.print(
                    f"  {workload}, max_tokens {max_tokens}, {n} clients: "
                    f"{level.tokens_per_s:.1f} tok/s, p50 {level.p50_ms:.0f} ms"
                )
    return levels


@dataclass
class EngineResult:
    engine: str
    raw: PathResult
    service: PathResult
    concurrency: dict[tuple[str, int, int], Level]


def bench_engine(
    engine: str, args: argparse.Namespace, make_raw: Callable[[], RawLlamaCpp | RawTransformers]
) -> EngineResult:
    env = {
        "RAGRAIL_GENERATOR_ENGINE": engine,
        "RAGRAIL_GENERATOR_THREADS": str(args.threads),
        "RAGRAIL_GENERATOR_MAX_BATCH_SIZE": str(max(args.concurrency)),
        "RAGRAIL_GENERATOR_QUEUE_SIZE": "64",
        "RAGRAIL_GENERATOR_CONTEXT_LENGTH": str(args.context),
        "RAGRAIL_GENERATOR_KV_CACHE_TOKENS": str(args.context * max(args.concurrency)),
    }
    if engine == "torch":
        env["RAGRAIL_GENERATOR_DEVICE"] = args.device
        env["RAGRAIL_GENERATOR_MODEL"] = args.torch_model
    elif args.gguf:
        env["RAGRAIL_GENERATOR_MODEL"] = args.gguf
    with tempfile.TemporaryDirectory(prefix="ragrail-bench-generator-") as tmp:
        service = Service(env, Path(tmp) / f"{engine}.log")
        try:
            console.print(f"[bold]{engine}[/bold]: loading the raw library and the service")
            raw = make_raw()
            asyncio.run(service.wait())
            return measure(engine, service, raw, args)
        finally:
            service.stop()


def measure(
    engine: str, service: Service, raw: RawLlamaCpp | RawTransformers, args: argparse.Namespace
) -> EngineResult:
    prompts = PROMPTS[: args.prompts]
    raw_result = PathResult(raw.label)
    service_result = PathResult(f"service, {engine} engine: gRPC GenerateStream")

    async def service_run(prompt: str) -> Run:
        async with grpc.aio.insecure_channel(service.target) as channel:
            stub = generator_pb2_grpc.GeneratorStub(channel)
            return await stream_one(stub, prompt, args.max_tokens, True, seed=0)

    # Warm both (first calls size buffers and compile kernels) on a prompt not measured, so
    # the service has no measured prompt to reuse; then take turns per prompt.
    raw.run(PROMPTS[-1], 4)
    asyncio.run(service_run(PROMPTS[-1]))
    for prompt in prompts:
        raw_result.runs.append(raw.run(prompt, args.max_tokens))
        service_result.runs.append(asyncio.run(service_run(prompt)))
        console.print(
            f"  {engine} single stream: {service_result.runs[-1].tokens} tokens, service "
            f"{service_result.runs[-1].tokens / service_result.runs[-1].total:.1f} tok/s, raw "
            f"{raw_result.runs[-1].tokens / raw_result.runs[-1].total:.1f} tok/s"
        )
    if isinstance(raw, RawTransformers):
        del raw.model  # free its memory (and threads) before the concurrent runs
    return EngineResult(engine, raw_result, service_result, concurrency_levels(service, args))


def single_table(results: list[EngineResult], args: argparse.Namespace) -> Table:
    table = Table(
        title=f"Single stream, greedy: {args.prompts} prompts, up to {args.max_tokens} tokens each"
    )
    columns = ("path", "TTFT p50 ms", "tokens/s", "decode tokens/s", "ratio vs raw",
               "same text", "prompt tokens/s")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="right")
    for r in results:
        same = sum(a.text == b.text for a, b in zip(r.raw.runs, r.service.runs, strict=True))
        ratio = f"{r.service.tokens_per_s / r.raw.tokens_per_s:.2f}"
        rows = ((r.raw, "1.00", ""), (r.service, ratio, f"{same}/{len(r.raw.runs)}"))
        for path, ratio, same_cell in rows:
            table.add_row(
                path.label,
                f"{path.ttft_ms:.0f}",
                f"{path.tokens_per_s:.1f}",
                f"{path.decode_per_s:.1f}",
                ratio,
                same_cell,
                f"{path.prefill_per_s:.0f}",
            )
    table.caption = (
        "tokens/s = answer tokens / time from request to last token (prefill included); "
        "decode tokens/s leaves out the time to the first token; prompt tokens/s (prompt "
        "tokens / TTFT) is the rate of passes carrying many tokens, the ceiling for batching. "
        "Target: service >= 0.9 x raw."
    )
    return table


def concurrency_table(results: list[EngineResult], args: argparse.Namespace) -> Table:
    table = Table(
        title=f"Concurrent clients through the service: {max(args.concurrency)} questions per "
        f"round, {args.rounds} rounds, sampled (seeded)"
    )
    columns = ("engine", "workload", "max_tokens", "clients", "aggregate tokens/s", "vs 1",
               "p50 latency ms", "vs 1", "TTFT p50 ms", "same text")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="right")
    for r in results:
        base_n = min(args.concurrency)
        for (workload, max_tokens, n), level in r.concurrency.items():
            base = r.concurrency[(workload, max_tokens, base_n)]
            same = sum(a.text == b.text for a, b in zip(base.runs, level.runs, strict=True))
            table.add_row(
                r.engine,
                workload,
                str(max_tokens),
                str(n),
                f"{level.tokens_per_s:.1f}",
                f"{level.tokens_per_s / base.tokens_per_s:.2f}",
                f"{level.p50_ms:.0f}",
                f"{level.p50_ms / base.p50_ms:.2f}",
                f"{level.ttft_ms:.0f}",
                f"{same}/{len(level.runs)}",
            )
    table.caption = (
        "aggregate tokens/s = answer tokens / wall time of the rounds; latency from request to "
        "last token. Target (issue 17): 4 clients >= 2.5 x the aggregate of 1 client, with p50 "
        "<= 2 x."
    )
    return table
