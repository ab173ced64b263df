"""End-to-end RAG benchmark: grounded chat and search through the gateway, on SciFact.

    python bench/rag.py                                   # starts the suite, embedded defaults
    python bench/rag.py --concurrency 1,4 --questions 24 --max-tokens 32
    python bench/rag.py --gateway http://127.0.0.1:8080   # a running suite, as configured

It ingests a SciFact subset (the documents relevant to the chosen test questions, then others
up to --docs) and prints, in one run:
  * /v1/chat/completions (streamed) at each concurrency: requests/s, end-to-end p50/p95 and
    time to first token as the client sees them, each stage's share of the total, and the
    gateway's own part: total minus the stages it timed (service calls);
  * /v1/search through the gateway against the same embedder + retriever calls made directly
    over gRPC from this process, at --search-concurrency clients: the gateway's overhead as a
    share of the end-to-end time (the baseline is measured in the same run).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from bench.common import SHARED_DATA, load_beir, percentiles, running_suite, stream_chat
from bench.retrieval import COLLECTION, ingest
from ragrail.client import GatewayClient

console = Console()
STAGES = ("retrieval_ms", "rerank_ms", "guardrails_ms", "prompt_ms", "generation_ms")


def subset(corpus: dict, qrels: dict, qids: list[str], size: int, seed: int) -> dict:
    """The documents relevant to the questions, then random others up to `size`."""
    keep = {d for q in qids for d in qrels[q] if d in corpus}
    others = sorted(set(corpus) - keep)
    random.Random(seed).shuffle(others)
    keep.update(others[: max(size - len(keep), 0)])
    return {d: corpus[d] for d in sorted(keep)}


def one_chat(client: GatewayClient, question: str, max_tokens: int) -> dict:
    chat = stream_chat(client, question, COLLECTION, max_tokens)
    return {"total": chat.total_ms, "ttft": chat.ttft_ms, "timings": chat.final.get("timings", {})}


def chat_load(url: str, questions: list[str], clients: int, max_tokens: int) -> dict:
    """Runs every question once, `clients` at a time, each client its own connection."""
    pool_clients = [GatewayClient(url, timeout_s=600) for _ in range(clients)]
    results: list[dict] = []
    start = time.perf_counter()
    with (
        ThreadPoolExecutor(clients) as pool,
        tqdm(total=len(questions), desc=f"chat x{clients}", unit="q") as bar,
    ):
        futures = [
            pool.submit(one_chat, pool_clients[i % clients], q, max_tokens)
            for i, q in enumerate(questions)
        ]
        for future in futures:
            results.append(future.result())
            bar.update()
    elapsed = time.perf_counter() - start
    for c in pool_clients:
        c.close()
    totals = [r["total"] for r in results]
    share = {
        s: statistics.mean(r["timings"].get(s, 0.0) / r["total"] for r in results) for s in STAGES
    }
    gateway = statistics.mean(
        max(r["total"] - sum(r["timings"].get(s, 0.0) for s in STAGES), 0.0) / r["total"]
        for r in results
    )
    p50, p95 = percentiles(totals)
    t50, t95 = percentiles([r["ttft"] for r in results])
    return {
        "clients": clients,
        "rps": len(results) / elapsed,
        "p50": p50,
        "p95": p95,
        "ttft50": t50,
        "ttft95": t95,
        "share": share,
        "gateway": gateway,
    }


async def timed(
    queries: list[str], clients: int, one: Callable[[str], Awaitable[object]]
) -> list[float]:
    """Milliseconds of `one(query)` for every query, `clients` at a time from this loop."""
    latencies: list[float] = []
    queue: asyncio.Queue[str] = asyncio.Queue()
    for q in queries:
        queue.put_nowait(q)

    async def worker() -> None:
        while not queue.empty():
            query = queue.get_nowait()
            start = time.perf_counter()
            await one(query)
            latencies.append((time.perf_counter() - start) * 1000)

    await asyncio.gather(*(worker() for _ in range(clients)))
    return latencies


async def direct_search(
    embedder_url: str, retriever_url: str, queries: list[str], clients: int, top_k: int
) -> list[float]:
    """The gateway's hybrid search path (embed the query, then retrieve), called directly over
    gRPC: the baseline of the gateway's overhead."""
    from shared.clients import ServiceClient
    from shared.proto.ragrail.v1 import (
        embedder_pb2,
        embedder_pb2_grpc,
        retriever_pb2,
        retriever_pb2_grpc,
    )

    embedder = ServiceClient("embedder", embedder_url, embedder_pb2_grpc.EmbedderStub)
    retriever = ServiceClient("retriever", retriever_url, retriever_pb2_grpc.RetrieverStub)

    async def one(query: str) -> None:
        reply = await embedder.call(
            "Embed",
            embedder_pb2.EmbedRequest(texts=[query], input_type=embedder_pb2.INPUT_TYPE_QUERY),
        )
        await retriever.call(
            "Search",
            retriever_pb2.SearchRequest(
                collection=COLLECTION,
                query_text=query,
                query_vector=list(reply.embeddings[0].values),
                mode=retriever_pb2.SEARCH_MODE_HYBRID,
                fetch_k=top_k,
                fusion=retriever_pb2.FUSION_METHOD_RRF,
            ),
        )

    try:
        return await timed(queries, clients, one)
    finally:
        await embedder.close()
        await retriever.close()


async def gateway_search(url: str, queries: list[str], clients: int, top_k: int) -> list[float]:
    """The same queries through the gateway's /v1/search, from one event loop like the direct
    baseline (so both sides pay the same client-side costs)."""
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=120) as http:

        async def one(query: str) -> None:
            body = {"query": query, "collection": COLLECTION, "top_k": top_k, "rerank": False}
            reply = await http.post("/v1/search", json=body)
            reply.raise_for_status()
            reply.json()

        return await timed(queries, clients, one)


def run(url: str, args: argparse.Namespace, corpus: dict, questions: list[str]) -> None:
    client = GatewayClient(url, timeout_s=1800)
    seconds, chunks = ingest(client, corpus, batch=64, workers=2)
    console.print(f"ingested {len(corpus)} documents ({chunks} chunks) in {seconds:.0f} s")
    if args.concurrency:
        chat_table(url, args, client, questions)
    search_overhead(url, args, questions)
    client.close()


def chat_table(
    url: str, args: argparse.Namespace, client: GatewayClient, questions: list[str]
) -> None:
    one_chat(client, questions[0], args.max_tokens)  # warm-up: first-call costs out of the way
    table = Table(title=f"/v1/chat/completions, streamed, {args.max_tokens} tokens max")
    for col in ("clients", "req/s", "p50 ms", "p95 ms", "TTFT p50", "TTFT p95"):
        table.add_column(col, justify="right")
    for col in ("retrieval", "rerank", "rails", "prompt", "generation", "gateway"):
        table.add_column(col, justify="right")
    for clients in args.concurrency:
        r = chat_load(url, questions, clients, args.max_tokens)
        shares = [f"{r['share'][s] * 100:.0f}%" for s in STAGES]
        table.add_row(
            str(clients),
            f"{r['rps']:.2f}",
            f"{r['p50']:.0f}",
            f"{r['p95']:.0f}",
            f"{r['ttft50']:.0f}",
            f"{r['ttft95']:.0f}",
            *shares,
            f"{r['gateway'] * 100:.1f}%",
        )
    console.print(table)


def search_overhead(url: str, args: argparse.Namespace, questions: list[str]) -> None:
    queries = (questions * (1 + args.search_queries // len(questions)))[: args.search_queries]
    clients = args.search_concurrency
    embedder = args.embedder or os.environ.get("RAGRAIL_GATEWAY_EMBEDDER_URL", "127.0.0.1:50051")
    retriever = args.retriever or os.environ.get("RAGRAIL_GATEWAY_RETRIEVER_URL", "127.0.0.1:50053")
    # The sides alternate, round after round, so neither gets the quieter machine; each
    # round's overhead is also reported, since other load on a laptop moves single rounds.
    via_gateway, direct, rounds = [], [], []
    asyncio.run(gateway_search(url, queries[:20], clients, args.top_k))  # warm-up
    for _ in range(args.search_rounds):
        g = asyncio.run(gateway_search(url, queries, clients, args.top_k))
        d = asyncio.run(direct_search(embedder, retriever, queries, clients, args.top_k))
        rounds.append((statistics.mean(g) - statistics.mean(d)) / statistics.mean(g) * 100)
        via_gateway += g
        direct += d
    g50, g95 = percentiles(via_gateway)
    d50, d95 = percentiles(direct)
    g_mean, d_mean = statistics.mean(via_gateway), statistics.mean(direct)
    table = Table(title=f"/v1/search (hybrid, top {args.top_k}) at {clients} concurrent clients")
    for col in ("path", "mean ms", "p50 ms", "p95 ms"):
        table.add_column(col, justify="right")
    table.add_row("gateway (HTTP, FastAPI)", f"{g_mean:.1f}", f"{g50:.1f}", f"{g95:.1f}")
    table.add_row("direct gRPC, one process", f"{d_mean:.1f}", f"{d50:.1f}", f"{d95:.1f}")
    console.print(table)
    console.print(
        f"gateway overhead: {(g_mean - d_mean) / g_mean * 100:.1f}% of the end-to-end time "
        f"(mean), {(g50 - d50) / g50 * 100:.1f}% at p50; per round (mean): "
        + ", ".join(f"{r:.1f}%" for r in rounds)
        + f"; median round {statistics.median(rounds):.1f}%"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "scifact")
    parser.add_argument("--gateway", help="Measure a running suite instead of starting one.")
    parser.add_argument("--embedder", help="host:port for the direct baseline (with --gateway).")
    parser.add_argument("--retriever", help="host:port for the direct baseline (with --gateway).")
    parser.add_argument("--docs", type=int, default=600, help="Documents ingested.")
    parser.add_argument("--questions", type=int, default=32, help="SciFact test questions.")
    parser.add_argument(
        "--concurrency",
        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
        default=[1, 4, 16],
        help="Concurrent chat clients, comma-separated (empty: /v1/search only).",
    )
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--search-queries", type=int, default=200)
    parser.add_argument("--search-concurrency", type=int, default=4)
    parser.add_argument("--search-rounds", type=int, default=4, help="Alternating rounds.")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    if not (args.data / "corpus.jsonl").exists():
        console.print(f"[red]{args.data} holds no BEIR data (corpus.jsonl); pass --data[/red]")
        return 2
    corpus, queries, qrels = load_beir(args.data, "test")
    qids = sorted(queries)[: args.questions]
    questions = [queries[q] for q in qids]
    docs = subset(corpus, qrels, qids, args.docs, args.seed)
    if args.gateway:
        run(args.gateway, args, docs, questions)
        return 0
    with running_suite() as url:
        run(url, args, docs, questions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
