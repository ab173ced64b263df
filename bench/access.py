"""Cost of API key scopes and the mandatory access filter on /v1/search (issue 30), and how
fast a key removed from the key file is refused after SIGHUP.

    python bench/access.py --backend milvus --docs 300 --queries 150 --rounds 4

Starts the suite (no keys; the retriever on Milvus Lite or FAISS), ingests a SciFact subset,
then starts a second gateway on the same embedder and retriever with a YAML key file of two
keys: one restricted to a group, so every search it serves goes through the scope check and
carries the `access_groups` filter inside the retriever query, and one that sees every
document (the scope check alone, no filter). With `--restricted-share`, that share of the
documents carries an access list (half team A's, half team B's); by default none does, the
case of the original measurement. The same queries alternate between the arms, round by
round, in a rotating order, so each arm meets the machine's load alike; the table compares
p50/p95 and the ratio to no keys.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
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
KEY_ALL = "bench-all-docs-key-0123456789"
KEY_FILE = (
    f"keys:\n  - name: team-a\n    key: {KEY}\n"
    '    read: ["*"]\n    groups: ["team-a"]\n'
    f"  - name: everything\n    key: {KEY_ALL}\n"
    '    read: ["*"]\n    groups: ["*"]\n'
)


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


def with_access_lists(docs: dict, share: float) -> dict[str, dict]:
    """Metadata per document id: an access list for `share` of them (team A or B, alike)."""
    rng = random.Random(0)
    metadata: dict[str, dict] = {}
    for doc_id in docs:
        if rng.random() < share:
            metadata[doc_id] = {"access_groups": [rng.choice(["team-a", "team-b"])]}
    return metadata


def sighup_refusals(url, keys: Path, times: int) -> list[float]:  # type: ignore[no-untyped-def]
    """Milliseconds from SIGHUP (after the key file lost KEY) to KEY's first 401, `times` times;
    polled every 2 ms. The file is restored (and reloaded) between tries."""
    refused: list[float] = []
    without = KEY_FILE.replace(f"key: {KEY}\n", "key: bench-team-a-rotated-000000\n")
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}) as http:
        for _ in range(times):
            keys.write_text(without)
            url.process.send_signal(signal.SIGHUP)
            sent = time.perf_counter()
            while http.get("/v1/collections").status_code != 401:
                if time.perf_counter() - sent > 10:
                    raise SystemExit("the removed key still works 10 s after SIGHUP")
                time.sleep(0.002)
            refused.append((time.perf_counter() - sent) * 1000)
            keys.write_text(KEY_FILE)
            url.process.send_signal(signal.SIGHUP)
            while http.get("/v1/collections").status_code != 200:
                time.sleep(0.01)
    return refused


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "scifact")
    parser.add_argument("--backend", choices=["milvus", "faiss"], default="milvus")
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--restricted-share", type=float, default=0.0)
    parser.add_argument("--sighup", type=int, default=10, help="SIGHUP refusals to time")
    args = parser.parse_args()
    corpus, queries, _ = load_beir(args.data, "test")
    docs = dict(sorted(corpus.items())[: args.docs])
    texts = [queries[q] for q in sorted(queries)][: args.queries]
    scratch = tempfile.TemporaryDirectory()
    env = {"RAGRAIL_RETRIEVER_BACKEND": args.backend}
    if args.backend == "faiss":
        env["RAGRAIL_RETRIEVER_FAISS_DIR"] = str(Path(scratch.name) / "faiss")
    arms = {"no keys": [], "scoped key, all documents": [], "scoped key + access filter": []}
    with running_suite(env) as open_url, scratch:
        client = GatewayClient(open_url, timeout_s=1800)
        seconds, chunks = ingest(
            client, docs, batch=64, workers=2,
            metadata=with_access_lists(docs, args.restricted_share),
        )  # fmt: skip
        console.print(f"ingested {len(docs)} documents ({chunks} chunks) in {seconds:.0f} s")
        keys = Path(scratch.name) / "keys.yaml"
        keys.write_text(KEY_FILE)
        with gateway_process(api_keys_file=str(keys)) as keyed_url:
            sides = [(open_url, None), (keyed_url, KEY_ALL), (keyed_url, KEY)]
            for url, key in sides:  # warm-up
                asyncio.run(searches(url, texts[:20], key, args.clients))
            for r in range(args.rounds):
                # Rotate the order, so no arm always gets the quieter moment.
                for i in range(len(sides)):
                    (url, key), name = sides[(i + r) % 3], list(arms)[(i + r) % 3]
                    arms[name] += asyncio.run(searches(url, texts, key, args.clients))
            refused = sighup_refusals(keyed_url, keys, args.sighup) if args.sighup else []
    title = (
        f"/v1/search (hybrid, top 10), {args.backend}, {args.clients} clients, {len(docs)} docs, "
        f"{args.restricted_share:.0%} with an access list"
    )
    table = Table(title=title)
    for col in ("gateway", "n", "mean ms", "p50 ms", "p95 ms", "p50 vs no keys"):
        table.add_column(col, justify="right")
    base = percentiles(arms["no keys"])[0]
    for name, values in arms.items():
        p50, p95 = percentiles(values)
        table.add_row(name, str(len(values)), f"{statistics.mean(values):.1f}", f"{p50:.1f}",
                      f"{p95:.1f}", f"{(p50 - base) / base * 100:+.1f}%")  # fmt: skip
    console.print(table)
    if refused:
        console.print(
            f"key removed, SIGHUP -> first 401: median {statistics.median(refused):.0f} ms, "
            f"max {max(refused):.0f} ms over {len(refused)} reloads"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
