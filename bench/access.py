"""Cost of API key scopes and the mandatory access filter on /v1/search (issue 30).

    python bench/access.py --docs 300 --queries 200 --rounds 4

Starts the suite (no keys), ingests a SciFact subset, then starts a second gateway on the same
embedder and retriever with a YAML key file whose key is restricted to a group, so every
search it serves goes through the scope check and carries the `access_groups` filter inside
the retriever query. The same queries alternate between the two gateways, round by round,
and the table compares p50/p95.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from rich.console import Console
from rich.table import Table

from bench.common import SHARED_DATA, load_beir, percentiles, running_suite
from bench.retrieval import COLLECTION, ingest
from ragrail.client import GatewayClient
from tests.conftest import gateway_process

console = Console()
KEY = "bench-team-a-key-0123456789"


async def searches(url: str, queries: list[str], key: str | None, clients: int) -> list[float]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    latencies: list[float] = []
    queue = list(queries)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:

        async def worker() -> None:
            while queue:
                query = queue.pop()
                start = time.perf_counter()
                body = {"query": query, "collection": COLLECTION, "top_k": 10, "rerank": False}
                reply = await http.post("/v1/search", json=body)
                reply.raise_for_status()
                latencies.append((time.perf_counter() - start) * 1000)

        await asyncio.gather(*(worker() for _ in range(clients)))
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "scifact")
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    corpus, queries, _ = load_beir(args.data, "test")
    docs = dict(sorted(corpus.items())[: args.docs])
    texts = [queries[q] for q in sorted(queries)][: args.queries]
    with running_suite() as open_url, tempfile.TemporaryDirectory() as tmp:
        client = GatewayClient(open_url, timeout_s=1800)
        seconds, chunks = ingest(client, docs, batch=64, workers=2)
        console.print(f"ingested {len(docs)} documents ({chunks} chunks) in {seconds:.0f} s")
        keys = Path(tmp) / "keys.yaml"
        keys.write_text(
            f"keys:\n  - name: team-a\n    key: {KEY}\n"
            f'    read: ["*"]\n    groups: ["team-a"]\n'
        )
        with gateway_process(api_keys_file=str(keys)) as keyed_url:
            asyncio.run(searches(open_url, texts[:20], None, args.clients))  # warm-up
            asyncio.run(searches(keyed_url, texts[:20], KEY, args.clients))
            open_ms: list[float] = []
            keyed_ms: list[float] = []
            for r in range(args.rounds):
                # Alternate which goes first, so neither always gets the quieter moment.
                sides = [(open_url, None, open_ms), (keyed_url, KEY, keyed_ms)]
                for url, key, sink in sides if r % 2 == 0 else reversed(sides):
                    sink += asyncio.run(searches(url, texts, key, args.clients))
    table = Table(title=f"/v1/search (hybrid, top 10), {args.clients} clients, {len(docs)} docs")
    for col in ("gateway", "n", "mean ms", "p50 ms", "p95 ms"):
        table.add_column(col, justify="right")
    for name, values in (("no keys", open_ms), ("scoped key + access filter", keyed_ms)):
        p50, p95 = percentiles(values)
        table.add_row(name, str(len(values)), f"{statistics.mean(values):.1f}", f"{p50:.1f}",
                      f"{p95:.1f}")  # fmt: skip
    console.print(table)
    o50, k50 = percentiles(open_ms)[0], percentiles(keyed_ms)[0]
    console.print(f"p50 cost of scopes + mandatory filter: {(k50 - o50) / o50 * 100:+.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
