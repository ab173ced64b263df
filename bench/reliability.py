"""Reliability benchmark: load, kill -9 under load, and ingest through a kill, on the real suite.

    python bench/reliability.py                       # everything, `ragrail up` defaults
    python bench/reliability.py --phases search,chat --duration 20
    python bench/reliability.py --phases kill --kill retriever,embedder

It starts what `ragrail up` starts on free ports, with the launcher restarting a service that
dies (as `ragrail up` does), ingests samples/corpus into the `sample` collection and prints:

  * search: --search-clients clients on /v1/search for --duration s: requests/s, p50/p95/p99,
    responses by status;
  * chat: non-streamed /v1/chat/completions on the sample collection at max_tokens
    --chat-max-tokens, one client, then --chat-clients clients: requests/s, p50, and the two
    ratios (aggregate throughput vs one client, p50 vs one client) — the baseline is the
    single client of the same run;
  * kill: for each service in --kill, search load (chat load too for the generator), SIGKILL
    of the service after a few seconds; responses by status, errors that were not a clean 503,
    and seconds from the kill to the first success after the last failure;
  * ingest: --ingest-docs generated documents in batches, the retriever SIGKILLed mid-way, the
    failed batches sent again; documents and chunks afterwards against a clean count (no
    loss, no duplicates).

Nothing here is a timed test: the figures depend on the machine, so they are printed.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import numpy as np
from rich.console import Console
from rich.table import Table

from bench.common import REPO, suite_supervisor
from ragrail.client import GatewayClient, find_documents

console = Console()
COLLECTION = "sample"
QUESTIONS = [
    "how do honeybees tell each other where food is?",
    "what does a sourdough starter contain?",
    "how did the Mars rovers land?",
    "what happens in a TCP three-way handshake?",
    "why do volcanoes form at plate boundaries?",
    "what do plants need for photosynthesis?",
    "when was the first bicycle built?",
    "which cities lie on the Rhine?",
]


@dataclass
class Load:
    """What a load run saw: (start offset s, latency ms, status) per request."""

    started: float = field(default_factory=time.monotonic)
    rows: list[tuple[float, float, int]] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, t0: float, ms: float, status: int, error: str = "") -> None:
        with self.lock:
            self.rows.append((t0 - self.started, ms, status))
            if error:
                self.errors[error[:120]] += 1

    def statuses(self) -> Counter:
        return Counter(s for _, _, s in self.rows)

    def latencies(self, ok_only: bool = True) -> list[float]:
        return [ms for _, ms, s in self.rows if s == 200 or not ok_only]

    def rate(self, seconds: float) -> float:
        return sum(1 for *_, s in self.rows if s == 200) / seconds


def run_load(
    clients: int, seconds: float, one: Callable[[httpx.Client, int], tuple[int, str]], url: str
) -> Load:
    """`clients` threads calling `one(http, i)` back to back for `seconds`; status 0 means the
    connection itself failed."""
    load = Load()
    stop_at = time.monotonic() + seconds

    def worker(n: int) -> None:
        i = n
        with httpx.Client(base_url=url, timeout=120) as http:
            while time.monotonic() < stop_at:
                t0 = time.monotonic()
                try:
                    status, error = one(http, i)
                except httpx.HTTPError as exc:
                    status, error = 0, f"{type(exc).__name__}: {exc}"
                load.add(t0, (time.monotonic() - t0) * 1000, status, error)
                i += clients

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(worker, range(clients)))
    return load


def search_once(http: httpx.Client, i: int) -> tuple[int, str]:
    body = {"query": QUESTIONS[i % len(QUESTIONS)], "collection": COLLECTION, "top_k": 5}
    reply = http.post("/v1/search", json=body)
    return reply.status_code, "" if reply.status_code == 200 else reply.text[:200]


def chat_once(max_tokens: int) -> Callable[[httpx.Client, int], tuple[int, str]]:
    def one(http: httpx.Client, i: int) -> tuple[int, str]:
        body = {
            "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
            "collection": COLLECTION,
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        reply = http.post("/v1/chat/completions", json=body)
        return reply.status_code, "" if reply.status_code == 200 else reply.text[:200]

    return one


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def status_text(counts: Counter) -> str:
    return ", ".join(f"{s or 'conn'}: {n}" for s, n in sorted(counts.items()))


def recovery_s(load: Load, kill_at: float) -> float:
    """Seconds from the kill to the first success after the last failure (0: none failed),
    by completion time."""
    # By completion time: a request in flight at the kill fails after it.
    after = sorted((t + ms / 1000, s) for t, ms, s in load.rows if t + ms / 1000 >= kill_at)
    failures = [t for t, s in after if s != 200]
    if not failures:
        return 0.0
    last = failures[-1]
    first_ok = next((t for t, s in after if t > last and s == 200), None)
    return (first_ok - kill_at) if first_ok is not None else float("inf")


def search_phase(url: str, args: argparse.Namespace) -> None:
    load = run_load(args.search_clients, args.duration, search_once, url)
    ms = load.latencies()
    table = Table(title=f"/v1/search, {args.search_clients} clients, {args.duration:.0f} s")
    for col in ("req/s", "p50 ms", "p95 ms", "p99 ms", "responses"):
        table.add_column(col)
    table.add_row(
        f"{load.rate(args.duration):.1f}",
        f"{pct(ms, 50):.1f}",
        f"{pct(ms, 95):.1f}",
        f"{pct(ms, 99):.1f}",
        status_text(load.statuses()),
    )
    console.print(table)


def chat_phase(url: str, args: argparse.Namespace) -> None:
    one = chat_once(args.chat_max_tokens)
    with httpx.Client(base_url=url, timeout=120) as http:
        one(http, 0)  # warm-up: the first chat pays the model's first-call costs
    rows = []
    for clients in (1, args.chat_clients):
        load = run_load(clients, args.duration, one, url)
        ms = load.latencies()
        rows.append((clients, load.rate(args.duration), pct(ms, 50), load))
    base_rate, base_p50 = rows[0][1], rows[0][2]
    table = Table(title=f"chat, sample collection, max_tokens {args.chat_max_tokens}, non-streamed")
    for col in ("clients", "req/s", "p50 ms", "p95 ms", "throughput vs 1", "p50 vs 1", "responses"):
        table.add_column(col)
    for clients, rate, p50, load in rows:
        table.add_row(
            str(clients),
            f"{rate:.2f}",
            f"{p50:.0f}",
            f"{pct(load.latencies(), 95):.0f}",
            f"{rate / base_rate:.2f}x" if base_rate else "-",
            f"{p50 / base_p50:.2f}x" if base_p50 else "-",
            status_text(load.statuses()),
        )
    console.print(table)


def kill_phase(supervisor, url: str, args: argparse.Namespace) -> None:  # type: ignore[no-untyped-def]
    table = Table(title="kill -9 under load (the launcher restarts the service)")
    for col in ("service", "load", "requests", "responses", "non-503 errors", "recovery s"):
        table.add_column(col)
    running = {c.spec.name for c in supervisor.children}
    for name in args.kill.split(","):
        if name not in running:
            console.print(f"[yellow]{name} is not running in this suite; skipped[/]")
            continue
        loads = {"search": (args.search_clients, search_once)}
        if name == "generator":
            loads["chat"] = (2, chat_once(args.chat_max_tokens))
        results: dict[str, Load] = {}
        kill_offsets: dict[str, float] = {}

        def drive(kind: str, clients: int, fn: Callable, results=results) -> None:
            results[kind] = run_load(clients, args.kill_duration, fn, url)

        threads = [
            threading.Thread(target=drive, args=(kind, clients, fn))
            for kind, (clients, fn) in loads.items()
        ]
        for t in threads:
            t.start()
        time.sleep(args.kill_after)
        child = supervisor.child(name)
        os.kill(child.process.pid, signal.SIGKILL)
        killed = time.monotonic()
        for t in threads:
            t.join()
        for kind, load in results.items():
            kill_offsets[kind] = killed - load.started
            statuses = load.statuses()
            bad = sum(n for s, n in statuses.items() if s not in (200, 503))
            table.add_row(
                name,
                kind,
                str(len(load.rows)),
                status_text(statuses),
                str(bad),
                f"{recovery_s(load, kill_offsets[kind]):.1f}",
            )
            for error, n in load.errors.most_common(2):
                console.print(f"  {name}/{kind} x{n}: {error}")
        wait_serving(url, name)
    console.print(table)


def wait_serving(url: str, name: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            services = httpx.get(f"{url}/v1/health", timeout=5).json().get("services", {})
            if services.get(name, {"status": "SERVING"}).get("status") == "SERVING":
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.5)
    console.print(f"[red]{name} not serving {timeout_s:.0f} s after the kill[/]")


def ingest_phase(supervisor, url: str, args: argparse.Namespace) -> None:  # type: ignore[no-untyped-def]
    """Batches of generated documents; the retriever is killed while they go in; failed
    batches are sent again, as a user re-running ingest would."""
    rng = random.Random(0)
    words = (REPO / "samples" / "corpus" / "honeybee-colonies.md").read_text().split()
    docs = [
        {"id": f"gen-{i:04d}.txt", "name": f"gen-{i:04d}.txt",
         "text": " ".join(rng.choice(words) for _ in range(400))}
        for i in range(args.ingest_docs)
    ]  # fmt: skip
    batches = [docs[i : i + 5] for i in range(0, len(docs), 5)]
    client = GatewayClient(url, timeout_s=300)
    client.ensure_collection("ingest_kill")
    client.ensure_collection("ingest_clean")
    killer = threading.Timer(
        args.kill_after, lambda: os.kill(supervisor.child("retriever").process.pid, signal.SIGKILL)
    )
    failed: list[list[dict]] = []
    statuses: Counter = Counter()
    killer.start()
    for batch in batches:
        reply = client.http.post(
            "/v1/documents", json={"collection": "ingest_kill", "documents": batch}
        )
        statuses[reply.status_code] += 1
        if reply.status_code != 200:
            failed.append(batch)
    killer.join()
    wait_serving(url, "retriever")
    retried = 0
    for batch in failed:
        for _ in range(30):
            reply = client.http.post(
                "/v1/documents", json={"collection": "ingest_kill", "documents": batch}
            )
            if reply.status_code == 200:
                retried += 1
                break
            time.sleep(1)
    # A clean ingest of the same documents, and everything sent again: the counts to match.
    for batch in batches:
        client.ingest_texts("ingest_clean", batch)
    client.ingest_texts("ingest_kill", docs[:10])

    def counts(collection: str) -> tuple[int, int]:
        listed = client.http.get(
            "/v1/documents", params={"collection": collection, "limit": 10_000}
        ).json()
        return listed["total"], sum(d["chunks"] for d in listed["documents"])

    kill_docs, kill_chunks = counts("ingest_kill")
    clean_docs, clean_chunks = counts("ingest_clean")
    table = Table(title=f"ingest through a retriever kill ({len(batches)} batches of 5)")
    for col in ("batches", "failed then resent", "documents", "chunks", "clean run", "verdict"):
        table.add_column(col)
    ok = (kill_docs, kill_chunks) == (clean_docs, clean_chunks) == (len(docs), clean_chunks)
    table.add_row(
        status_text(statuses),
        f"{len(failed)} / {retried} ok",
        str(kill_docs),
        str(kill_chunks),
        f"{clean_docs} docs, {clean_chunks} chunks",
        "no loss, no duplicates" if ok else "[red]MISMATCH[/]",
    )
    console.print(table)
    client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", default="search,chat,kill,ingest")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--search-clients", type=int, default=16)
    parser.add_argument("--chat-clients", type=int, default=4)
    parser.add_argument("--chat-max-tokens", type=int, default=16)
    parser.add_argument("--kill", default="retriever,embedder,generator,guardrails")
    parser.add_argument("--kill-after", type=float, default=4.0)
    parser.add_argument("--kill-duration", type=float, default=20.0)
    parser.add_argument("--ingest-docs", type=int, default=60)
    parser.add_argument("--rails", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    phases = set(args.phases.split(","))
    env = {"HF_HUB_OFFLINE": "1"}
    if not args.rails:
        env["RAGRAIL_GATEWAY_GUARDRAILS_URL"] = ""
    with suite_supervisor(env, restart=True) as supervisor:
        url = supervisor.child("gateway").url
        console.print(f"suite up: {', '.join(c.spec.name for c in supervisor.children)}")
        client = GatewayClient(url, timeout_s=600)
        client.ensure_collection(COLLECTION)
        client.ingest_files(COLLECTION, find_documents([REPO / "samples" / "corpus"]))
        client.close()
        started = time.perf_counter()
        if "search" in phases:
            search_phase(url, args)
        if "chat" in phases:
            chat_phase(url, args)
        if "kill" in phases:
            kill_phase(supervisor, url, args)
        if "ingest" in phases:
            ingest_phase(supervisor, url, args)
        console.print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
