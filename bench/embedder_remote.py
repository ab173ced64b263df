"""The embedder's `openai` backend against its local backend on the same model, in one run.

    python bench/embedder_remote.py                 # infinity (.venv-infinity), packaged MiniLM
    python bench/embedder_remote.py --docs 1000     # a quicker run on part of the corpus
    python bench/embedder_remote.py --remote-url http://127.0.0.1:7997/v1 --remote-model NAME

It embeds BEIR SciFact's corpus and test queries with both backends as the embedder service
builds them (as services.embedder.backends does: local sentence-transformers on PyTorch,
and `openai` through a real server, by default infinity started here serving the same
packaged all-MiniLM-L6-v2 on a loopback port), and prints:
  * throughput (texts/s) of each over the same texts, timed slice by slice in alternating
    order so load from other processes falls on both alike, and the ratio remote/local;
  * dense nDCG@10 and recall@100 on the 300 test queries through each, and their difference;
  * how close the vectors are (cosine of each text's two vectors, min and mean).
On one machine the server and this process share the cores (one waits while the other
works), so the ratio is the cost of the HTTP hop and JSON, not of a faster server.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from rich.console import Console
from rich.table import Table

from bench.common import SHARED_DATA, load_beir
from shared.models.encoder import PACKAGED_MODEL_NAME, Encoder, TorchEncoder, packaged_minilm
from shared.models.remote import RemoteServer, RemoteServerSettings
from shared.models.remote_encoder import RemoteEncoder
from trainers.data import ndcg_at, recall_at

console = Console()


def doc_text(doc: dict) -> str:
    return f"{doc['title']}\n\n{doc['text']}".strip()


def pick_docs(corpus: dict, qrels: dict, limit: int) -> list[str]:
    """Every judged document first, then the others in corpus order, up to `limit` (0: all)."""
    judged = dict.fromkeys(d for rels in qrels.values() for d in rels if d in corpus)
    ids = list(judged) + [d for d in corpus if d not in judged]
    return ids[:limit] if limit else ids


def timed_embedding(
    backends: dict[str, Encoder], texts: list[str], slice_size: int, input_type: str
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Vectors of `texts` from each backend, and each one's seconds, slice by slice, the
    order of the backends alternating between slices."""
    names = list(backends)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in names}
    seconds = dict.fromkeys(names, 0.0)
    slices = range(0, len(texts), slice_size)
    for n, start in enumerate(slices):
        chunk = texts[start : start + slice_size]
        for name in names if n % 2 == 0 else names[::-1]:
            began = time.perf_counter()
            parts[name].append(backends[name].embed_for(chunk, input_type))  # type: ignore[arg-type]
            seconds[name] += time.perf_counter() - began
        done = min(start + slice_size, len(texts))
        rates = ", ".join(f"{k} {done / seconds[k]:.1f}/s" for k in names)
        kind = "queries" if input_type == "query" else "passages"
        console.print(f"  {kind} {done}/{len(texts)}: {rates}", highlight=False)
    return {name: np.concatenate(parts[name]) for name in names}, seconds


def retrieval(
    doc_ids: list[str], docs: np.ndarray, queries: np.ndarray, qids: list[str], qrels: dict
) -> dict[str, float]:
    scores = queries @ docs.T
    top = np.argsort(-scores, axis=1)[:, :100]
    ndcg, recall = [], []
    for row, qid in zip(top, qids, strict=True):
        ranked = [doc_ids[i] for i in row]
        ndcg.append(ndcg_at(ranked, qrels[qid], 10))
        recall.append(recall_at(ranked, qrels[qid], 100))
    return {"ndcg": float(np.mean(ndcg)), "recall": float(np.mean(recall))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "scifact")
    parser.add_argument("--docs", type=int, default=0, help="Embed only N documents (0: all).")
    parser.add_argument("--slice", type=int, default=256, help="Texts per timed slice.")
    parser.add_argument(
        "--remote-url", help="A running server's API base (default: start infinity)."
    )
    parser.add_argument("--remote-model", default="", help="Its model name (default: its first).")
    parser.add_argument("--remote-batch-size", type=int, default=64)
    parser.add_argument("--remote-concurrency", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    corpus, queries, qrels = load_beir(args.data)
    doc_ids = pick_docs(corpus, qrels, args.docs)
    texts = [doc_text(corpus[d]) for d in doc_ids]
    qids = list(queries)

    server = None
    url = args.remote_url
    if not url:
        from tests import infinity_peer

        if infinity_peer.missing():
            console.print(f"[red]{infinity_peer.missing()}[/red] (or pass --remote-url)")
            return 2
        log = Path(tempfile.mkdtemp(prefix="bench-infinity-")) / "infinity.log"
        server = infinity_peer.start({PACKAGED_MODEL_NAME: packaged_minilm()}, log)
        url = server.url
        console.print(f"infinity {url} (log {log})")
    try:
        # The two encoders the embedder's backends build (sentence-transformers and openai),
        # built here from shared/ as the service does: bench/ imports no services.* module.
        remote = RemoteServer(
            RemoteServerSettings(
                remote_url=url,
                remote_model=args.remote_model,
                # Timed, not limited: other jobs on the cores may slow a request.
                remote_timeout_s=600.0,
            ),
            "embedder",
        )
        backends: dict[str, Encoder] = {
            "local": TorchEncoder.load(
                packaged_minilm(),
                device="cpu",
                threads=0,
                max_length=0,
                batch_size=32,
                normalize=True,
                model_name=PACKAGED_MODEL_NAME,
            ),
            "openai": RemoteEncoder(
                remote,
                batch_size=args.remote_batch_size,
                tokenizer=str(packaged_minilm()),
                concurrency=args.remote_concurrency,
            ),
        }
        for backend in backends.values():
            backend.embed_for(texts[:32], "passage")  # warm-up
        console.print(
            f"{len(texts)} documents, {len(qids)} queries; local {backends['local'].model_name}, "
            f"openai {backends['openai'].model_name} at {url}; "
            f"load average before: {os.getloadavg()[0]:.2f}"
        )
        docs, doc_s = timed_embedding(backends, texts, args.slice, "passage")
        query_texts = [queries[q] for q in qids]
        qvecs, query_s = timed_embedding(backends, query_texts, args.slice, "query")
        load_after = os.getloadavg()[0]
        for backend in backends.values():
            backend.close()
    finally:
        if server is not None:
            from tests import infinity_peer

            infinity_peer.stop(server)

    results = {name: retrieval(doc_ids, docs[name], qvecs[name], qids, qrels) for name in docs}
    cosines = np.concatenate(
        [(docs["local"] * docs["openai"]).sum(1), (qvecs["local"] * qvecs["openai"]).sum(1)]
    )
    table = Table(title=f"SciFact ({len(texts)} docs, {len(qids)} test queries), same model")
    for column in ("backend", "docs/s", "queries/s", "nDCG@10", "recall@100"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    for name in ("local", "openai"):
        table.add_row(
            name,
            f"{len(texts) / doc_s[name]:.1f}",
            f"{len(qids) / query_s[name]:.1f}",
            f"{results[name]['ndcg']:.4f}",
            f"{results[name]['recall']:.4f}",
        )
    console.print(table)
    total = {name: doc_s[name] + query_s[name] for name in doc_s}
    console.print(
        f"throughput openai/local: {total['local'] / total['openai']:.3f}x "
        f"(documents {doc_s['local'] / doc_s['openai']:.3f}x, queries "
        f"{query_s['local'] / query_s['openai']:.3f}x)\n"
        f"nDCG@10 openai - local: {results['openai']['ndcg'] - results['local']['ndcg']:+.4f}\n"
        f"cosine local vs openai over {len(cosines)} texts: min {cosines.min():.6f}, "
        f"mean {cosines.mean():.6f}\n"
        f"load average after: {load_after:.2f} (cores: {os.cpu_count()})",
        highlight=False,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
