"""The generator service as a process, and its answers streamed over gRPC."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.common import free_port, spawn, stop
from bench.generation.runs import Run
from shared.proto.ragrail.v1 import common_pb2, generator_pb2, generator_pb2_grpc


class Service:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        full = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
        full.update(
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            RAGRAIL_GENERATOR_PORT=str(self.port),
            RAGRAIL_GENERATOR_METRICS_PORT="-1",
            RAGRAIL_GENERATOR_LOG_FORMAT="text",
            **env,
        )
        self.log = log
        self.process = spawn("services.generator", full, log)
        self.target = f"127.0.0.1:{self.port}"

    async def wait(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        async with grpc.aio.insecure_channel(self.target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise SystemExit(f"generator exited; log:\n{self.log.read_text()[-3000:]}")
                try:
                    reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=2)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.aio.AioRpcError:
                    pass
                await asyncio.sleep(0.3)
        raise SystemExit(f"generator not serving after {timeout} s; see {self.log}")

    def stop(self) -> None:
        stop(self.process)


async def stream_one(
    stub: generator_pb2_grpc.GeneratorStub,
    prompt: str,
    max_tokens: int,
    greedy: bool,
    seed: int,
    system: str = "",
) -> Run:
    sampling = generator_pb2.SamplingParams(max_tokens=max_tokens, seed=seed)
    sampling.temperature = 0.0 if greedy else 0.8
    messages = [common_pb2.ChatMessage(role="user", content=prompt)]
    if system:
        messages.insert(0, common_pb2.ChatMessage(role="system", content=system))
    req = generator_pb2.GenerateRequest(messages=messages, sampling=sampling)
    started = time.perf_counter()
    first = None
    parts: list[str] = []
    usage = generator_pb2.Usage()
    async for chunk in stub.GenerateStream(req, timeout=600):
        if first is None and chunk.delta:
            first = time.perf_counter()
        parts.append(chunk.delta)
        if chunk.finish_reason:
            usage = chunk.usage
    end = time.perf_counter()
    return Run(
        (first or end) - started,
        end - started,
        usage.completion_tokens,
        "".join(parts),
        usage.prompt_tokens,
    )


async def service_run(service: Service, system: str, question: str, tokens: int) -> Run:
    """One greedy chat streamed from a generator over gRPC."""
    async with grpc.aio.insecure_channel(service.target) as channel:
        stub = generator_pb2_grpc.GeneratorStub(channel)
        return await stream_one(stub, question, tokens, True, 0, system)


async def clients(
    target: str, n: int, questions: list[str], max_tokens: int, system: str
) -> tuple[float, list[Run]]:
    """The questions (seed = their index) sent by `n` clients at a time, each taking the
    next question when its answer is done; (wall seconds, answers in question order)."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = generator_pb2_grpc.GeneratorStub(channel)
        runs: list[Run | None] = [None] * len(questions)
        todo = iter(range(len(questions)))

        async def client() -> None:
            for i in todo:
                runs[i] = await stream_one(stub, questions[i], max_tokens, False, i, system)

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(n)))
        return time.perf_counter() - started, [r for r in runs if r is not None]
