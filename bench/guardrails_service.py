"""The guardrails service for benches: started as `ragrail up` would (on a free loopback port,
with a copy of the packaged rail configuration), timed gRPC calls to it (wall and the
service's CPU time per call), and the requests bench/guardrails.py and bench/remote_safety.py
send."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import yaml
from tqdm import tqdm

from bench.common import REPO, free_port
from shared.clients import grpc_serving
from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2, guardrails_pb2_grpc
from shared.text import STOP_ONLY

CONFIG = REPO / "services" / "guardrails" / "config"


# -- the service --------------------------------------------------------------------------


def config_dir(
    root: Path, name: str, input_flows: list[str] | None = None, **ragrail: dict
) -> Path:
    """A copy of the packaged config with other input flows and `custom_data.ragrail` keys."""
    target = root / name
    shutil.copytree(CONFIG, target)
    data = yaml.safe_load((target / "config.yml").read_text(encoding="utf-8"))
    if input_flows is not None:
        data["rails"]["input"]["flows"] = input_flows
    for key, value in ragrail.items():
        data["custom_data"]["ragrail"][key] = {**data["custom_data"]["ragrail"][key], **value}
    (target / "config.yml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return target


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its threads so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def service(env: dict[str, str], log: Path) -> Iterator[tuple[str, int]]:
    """`python -m services.guardrails` with `env`, until its health check says SERVING."""
    port = free_port()
    full = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
    full.update(
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        RAGRAIL_GUARDRAILS_PORT=str(port),
        RAGRAIL_GUARDRAILS_METRICS_PORT="-1",
        RAGRAIL_GUARDRAILS_LOG_LEVEL="WARNING",
        **env,
    )
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.guardrails"],
            cwd=REPO,
            env=full,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    target = f"127.0.0.1:{port}"

    try:
        deadline = time.monotonic() + 180
        while not asyncio.run(grpc_serving(target)):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"the guardrails service did not start:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.3)
        yield target, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


class Client:
    """Sequential calls over one channel, each timed end to end (gRPC included). With the
    service's pid it also records the service's CPU time per call: wall time on a machine
    shared with other work measures the others too, CPU time much less so."""

    def __init__(self, target: str | tuple[str, int]) -> None:
        self.target, self.pid = target if isinstance(target, tuple) else (target, 0)
        self.cpu_ms: list[float] = []

    def run(self, calls: list[tuple[str, object]], desc: str) -> tuple[list[object], list[float]]:
        before = cpu_seconds(self.pid) if self.pid else 0.0
        replies, ms = self._run(calls, desc)
        if self.pid:
            self.cpu_ms.append((cpu_seconds(self.pid) - before) * 1000 / max(len(calls), 1))
        return replies, ms

    def _run(self, calls: list[tuple[str, object]], desc: str) -> tuple[list[object], list[float]]:
        async def go() -> tuple[list[object], list[float]]:
            replies, ms = [], []
            async with grpc.aio.insecure_channel(self.target) as channel:
                stub = guardrails_pb2_grpc.GuardrailsStub(channel)
                for method, request in tqdm(calls, desc=desc, leave=False):
                    started = time.perf_counter()
                    replies.append(await getattr(stub, method)(request, timeout=60))
                    ms.append((time.perf_counter() - started) * 1000)
            return replies, ms

        return asyncio.run(go())


def input_request(text: str) -> tuple[str, object]:
    message = common_pb2.ChatMessage(role="user", content=text)
    return "CheckInput", guardrails_pb2.CheckInputRequest(messages=[message])


def output_requests(texts: list[str], n: int) -> list[tuple[str, object]]:
    """Answers grounded on the first of 5 chunks (its first two sentences), context 5 chunks."""
    calls = []
    for i in range(n):
        context = [texts[(i + j) % len(texts)] for j in range(5)]
        body = context[0].split("\n\n", 1)[-1]
        answer = " ".join(STOP_ONLY.split(body)[:2])
        calls.append(
            (
                "CheckOutput",
                guardrails_pb2.CheckOutputRequest(
                    messages=[common_pb2.ChatMessage(role="user", content="What did they find?")],
                    answer=answer,
                    context=[
                        common_pb2.TextPassage(id=str(j), text=t) for j, t in enumerate(context)
                    ],
                ),
            )
        )
    return calls


def retrieval_requests(texts: list[str], n: int) -> list[tuple[str, object]]:
    return [
        (
            "CheckRetrieval",
            guardrails_pb2.CheckRetrievalRequest(
                query="What did they find?",
                chunks=[
                    common_pb2.TextPassage(id=str(j), text=texts[(i + j) % len(texts)])
                    for j in range(5)
                ],
            ),
        )
        for i in range(n)
    ]
