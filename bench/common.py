"""Helpers the benchmarks share: BEIR data loading, latency percentiles, a service as a process,
a suite. IR metrics
are trainers.data's, so a benchmark figure and a model card compute nDCG the same way."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shared.topology import SERVICES
from tests.ports import free_port

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


def load_beir(root: Path, split: str = "test") -> tuple[dict, dict, dict]:
    """(corpus {id: {title, text}}, queries {id: text}, qrels {qid: {doc_id: grade}})."""
    corpus = {}
    with (root / "corpus.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            corpus[str(row["_id"])] = {"title": row.get("title", ""), "text": row["text"]}
    queries = {}
    with (root / "queries.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            queries[str(row["_id"])] = row["text"]
    qrels: dict[str, dict[str, int]] = {}
    with (root / "qrels" / f"{split}.tsv").open() as f:
        next(f)
        for line in f:
            qid, did, grade = line.rstrip("\n").split("\t")
            if int(grade) > 0:
                qrels.setdefault(qid, {})[did] = int(grade)
    return corpus, {q: queries[q] for q in qrels}, qrels


def dedupe(ids: list[str]) -> list[str]:
    """Document ranking from a chunk ranking: each document at its best chunk's position."""
    return list(dict.fromkeys(ids))


def spawn(module: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`python -m <module>` from the repository root with `env`, its output to `log`."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", module], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL when it has not exited 30 s later."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def percentiles(ms: list[float]) -> tuple[float, float]:
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


@contextlib.contextmanager
def running_suite(env: dict[str, str] | None = None) -> Iterator[str]:
    """Starts what `ragrail up` starts (embedder, retriever, generator, gateway, and the
    reranker when `env` or models/ give it a model) on free ports in a scratch directory, with
    `env` on top; yields the gateway URL. The process environment is restored afterwards, so
    suites can run one after another."""
    with suite_supervisor(env) as supervisor:
        yield supervisor.child("gateway").url


@contextlib.contextmanager
def suite_supervisor(env: dict[str, str] | None = None, *, restart: bool = False) -> Iterator:
    """`running_suite`, yielding its launcher Supervisor (children, their processes and logs).
    With `restart`, the Supervisor also restarts a child that exits, as `ragrail up` does (in a
    background thread), so a benchmark can kill a service and watch it come back."""
    import threading

    from ragrail.launcher import Supervisor

    with tempfile.TemporaryDirectory(prefix="ragrail-bench-") as tmp:
        ports = {n: str(free_port()) for n in SERVICES}
        saved = dict(os.environ)
        os.environ.update(
            {
                "RAGRAIL_EMBEDDER_PORT": ports["embedder"],
                "RAGRAIL_RETRIEVER_PORT": ports["retriever"],
                "RAGRAIL_RERANKER_PORT": ports["reranker"],
                "RAGRAIL_RERANKER_METRICS_PORT": "-1",
                "RAGRAIL_GENERATOR_PORT": ports["generator"],
                "RAGRAIL_GENERATOR_METRICS_PORT": "-1",
                "RAGRAIL_GUARDRAILS_PORT": ports["guardrails"],
                "RAGRAIL_GUARDRAILS_METRICS_PORT": "-1",
                "RAGRAIL_GATEWAY_PORT": ports["gateway"],
                "RAGRAIL_EMBEDDER_METRICS_PORT": "-1",
                "RAGRAIL_RETRIEVER_METRICS_PORT": "-1",
                "RAGRAIL_GATEWAY_EMBEDDER_URL": f"127.0.0.1:{ports['embedder']}",
                "RAGRAIL_GATEWAY_RETRIEVER_URL": f"127.0.0.1:{ports['retriever']}",
                "RAGRAIL_GATEWAY_MAX_REQUEST_MB": "500",
                "HF_HUB_OFFLINE": "1",
                **(env or {}),
            }
        )
        supervisor = Supervisor(Path(tmp), print, train=False)  # measure what is there
        stop: asyncio.Event | None = None
        loop = asyncio.new_event_loop()
        watcher = None
        try:
            loop.run_until_complete(supervisor.up())
            if restart:
                stop = asyncio.Event()
                watcher = threading.Thread(
                    target=loop.run_until_complete, args=(supervisor.watch(stop),), daemon=True
                )
                watcher.start()
            yield supervisor
        finally:
            if stop is not None and watcher is not None:
                loop.call_soon_threadsafe(stop.set)
                watcher.join(timeout=10)
            supervisor.down()
            loop.close()
            os.environ.clear()
            os.environ.update(saved)


@dataclass
class StreamedChat:
    """One streamed chat completion, timed: perf_counter seconds at the request, the first
    content token (None when none came) and the end; the content, the chunk that finished it
    and the usage chunk's figures."""

    start: float
    first: float | None
    end: float
    content: str
    final: dict
    usage: dict

    @property
    def ttft_ms(self) -> float:
        return ((self.first or self.end) - self.start) * 1000

    @property
    def total_ms(self) -> float:
        return (self.end - self.start) * 1000


def stream_chat(
    client: Any, question: str, collection: str, max_tokens: int, **options: Any
) -> StreamedChat:
    """Asks the gateway one question as a streamed chat on `collection` (temperature 0,
    `options` passed on) and times it."""
    start = time.perf_counter()
    first = None
    parts: list[str] = []
    final: dict = {}
    usage: dict = {}
    for chunk in client.chat_stream(
        [{"role": "user", "content": question}],
        collection=collection,
        max_tokens=max_tokens,
        temperature=0,
        **options,
    ):
        if chunk.get("usage"):
            usage = chunk["usage"]
        choice = chunk["choices"][0] if chunk.get("choices") else {}
        text = choice.get("delta", {}).get("content")
        if text:
            first = first or time.perf_counter()
            parts.append(text)
        if choice.get("finish_reason"):
            final = chunk
    return StreamedChat(start, first, time.perf_counter(), "".join(parts), final, usage)
