"""Fine-tunes the MiniLM embedder on (query, relevant passage) pairs with in-batch and hard
negatives (MultipleNegativesRankingLoss), from BEIR-format data.

    python -m trainers.embedder --data ../shared/data/scifact
    python -m trainers.embedder --data tests/fixtures/beir_tiny --out /tmp/emb \\
        --batch-size 4 --max-length 64 --epochs 1                   # a run of seconds

Each training example is (query, one relevant passage, hard negatives): the `--bm25-negatives`
best BM25 passages and the `--dense-negatives` best passages of the base model that the qrels
do not call relevant. Batches never hold the same query or passage twice, so no in-batch
negative is in fact a positive of its row. The base model is evaluated before training (its
corpus embeddings also mine the dense negatives) and the fine-tuned one after, by dense
retrieval over the whole corpus on `--eval-split` (nDCG@10, recall@100); the training split is
never the evaluation split.

The output directory (`models/embedder/<name>/<version>/` unless `--out`) is a
sentence-transformers model the embedder service loads by path
(`RAGRAIL_EMBEDDER_MODEL=DIR`), with `metrics.json`, `manifest.json` and a `README.md` model
card. After each epoch the model, optimizer and scheduler are saved under `checkpoint/`;
`--resume` goes on from the last one. The same seed, data and arguments give the same weights
on the same machine and library versions.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.models.runtime import offline
from trainers import data as common

METHOD = (
    "bi-encoder fine-tuning: MultipleNegativesRankingLoss with in-batch negatives and "
    "BM25 + base-model hard negatives"
)
CHECKPOINT = "checkpoint"


# -- data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    query_id: str
    positive: str  # document ids
    negatives: tuple[str, ...]


def examples(
    qrels: dict[str, dict[str, int]], negatives: dict[str, list[str]], n: int
) -> list[Example]:
    """One example per (query, relevant document); queries with fewer than n negatives (a corpus
    smaller than the ranking depth) are left out so every example has the same columns."""
    out = []
    for qid, relevant in qrels.items():
        negs = tuple(negatives.get(qid, [])[:n])
        if len(negs) < n:
            continue
        out += [Example(qid, did, negs) for did in relevant]
    return out


def batches(items: list[Example], size: int, rng: random.Random) -> list[list[Example]]:
    """Shuffled batches in which no query and no document appears twice: a duplicate would be
    scored as an in-batch negative of its own row. An example that does not fit waits for the
    next batch; the last batch may be short."""
    pending = items[:]
    rng.shuffle(pending)
    out: list[list[Example]] = []
    while pending:
        batch: list[Example] = []
        seen: set[str] = set()
        rest: list[Example] = []
        for ex in pending:
            keys = {f"q:{ex.query_id}", f"d:{ex.positive}", *(f"d:{d}" for d in ex.negatives)}
            if len(batch) < size and not keys & seen:
                batch.append(ex)
                seen |= keys
            else:
                rest.append(ex)
        out.append(batch)
        pending = rest
    return out


# -- retrieval ----------------------------------------------------------------------------


def retrieval_metrics(
    rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]
) -> dict[str, float]:
    return {
        "ndcg@10": round(common.mean(common.ndcg_at(rankings[q], qrels[q]) for q in qrels), 6),
        "recall@100": round(common.mean(common.recall_at(rankings[q], qrels[q]) for q in qrels), 6),
    }


# -- training -----------------------------------------------------------------------------


def load_model(path: str, max_length: int, device: str) -> Any:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(path, device=device, local_files_only=True)
    model.max_seq_length = max_length
    return model


def fit(
    model: Any,
    items: list[Example],
    data: common.Beir,
    args: argparse.Namespace,
    out: Path,
) -> dict[str, Any]:
    """Plain PyTorch loop: AdamW, linear warmup and decay, MultipleNegativesRankingLoss.
    Saves model, optimizer and scheduler under out/checkpoint/ after every epoch."""
    import torch
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from tqdm import tqdm
    from transformers import get_linear_schedule_with_warmup

    loss_fn = MultipleNegativesRankingLoss(model, scale=args.scale)
    plans = [
        batches(items, args.batch_size, random.Random(args.seed + e)) for e in range(args.epochs)
    ]
    total = sum(len(p) for p in plans)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(total * args.warmup_ratio), total)
    first_epoch, losses = 0, []
    state_file = out / CHECKPOINT / "trainer_state.pt"
    if args.resume and state_file.is_file():
        state = torch.load(state_file, weights_only=False)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        first_epoch, losses = state["epochs_done"], state["losses"]
        torch.set_rng_state(state["torch_rng"])
        print(f"resuming after epoch {first_epoch} from {state_file.parent}", flush=True)
    started = time.perf_counter()
    model.train()
    done = sum(len(p) for p in plans[:first_epoch])
    with tqdm(total=total, initial=done, desc="train", unit="step", file=sys.stderr) as bar:
        for epoch in range(first_epoch, args.epochs):
            for batch in plans[epoch]:
                columns = [
                    [data.queries[ex.query_id] for ex in batch],
                    [data.corpus[ex.positive] for ex in batch],
                    *(
                        [data.corpus[ex.negatives[i]] for ex in batch]
                        for i in range(len(batch[0].negatives))
                    ),
                ]
                features = [
                    {k: _to(v, model.device) for k, v in model.tokenize(col).items()}
                    for col in columns
                ]
                loss = loss_fn(features, None)
                losses.append(common.optimizer_step(loss, model, optimizer, scheduler))
                bar.set_postfix(epoch=epoch + 1, loss=f"{losses[-1]:.4f}")
                bar.update()
            save_checkpoint(model, optimizer, scheduler, epoch + 1, losses, out / CHECKPOINT)
    model.eval()
    return {
        "examples": len(items),
        "steps": total,
        "seconds": round(time.perf_counter() - started, 2),
        **common.loss_summary(losses),
    }


def _to(value: Any, device: Any) -> Any:
    return value.to(device) if hasattr(value, "to") else value


def save_checkpoint(
    model: Any, optimizer: Any, scheduler: Any, epochs_done: int, losses: list, path: Path
) -> None:
    """Writes a new checkpoint beside the old one and renames it into place, so a crash while
    saving leaves the previous checkpoint whole."""
    import torch

    staging = path.with_name(path.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    model.save(str(staging))
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "epochs_done": epochs_done,
            "losses": losses,
            "torch_rng": torch.get_rng_state(),
        },
        staging / "trainer_state.pt",
    )
    old = path.with_name(path.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        path.rename(old)
    staging.rename(path)
    shutil.rmtree(old, ignore_errors=True)


# -- output -------------------------------------------------------------------------------


def model_card(manifest: dict) -> str:
    m = manifest["metrics"]
    p = manifest["params"]
    d = manifest["data"]
    data = f"`{d['path']}`, split `{d['train_split']}`, sha256 `{d['sha256'][:16]}…`"
    training = (
        f"{m['train']['examples']} (query, positive) examples from {d['train_queries']} queries, "
        f"{p['bm25_negatives']} BM25 + {p['dense_negatives']} base-model hard negatives each, "
        f"{p['epochs']} epoch(s), batch {p['batch_size']}, lr {p['lr']}, max length "
        f"{p['max_length']}, scale {p['scale']}, seed {p['seed']}"
    )
    before, after = m["before"], m["after"]
    facts = common.card_facts(manifest, {"data": data, "training": training})
    return f"""# {manifest["name"]} / {manifest["version"]}

A sentence embedder (384-d, cosine) fine-tuned for retrieval by `python -m trainers.embedder`.

{facts}

## Evaluation

Dense retrieval over all {d["documents"]} documents for the {m["eval_queries"]} queries of split
`{m["eval_split"]}` (whole documents truncated to {p["max_length"]} tokens):

| model | nDCG@10 | recall@100 |
| --- | --- | --- |
| base | {before["ndcg@10"]:.4f} | {before["recall@100"]:.4f} |
| this model | {after["ndcg@10"]:.4f} | {after["recall@100"]:.4f} |

## Use

```bash
# from the repository root
RAGRAIL_EMBEDDER_MODEL={manifest["path"]} python -m services.embedder
python -m trainers.quantize embedder --model {manifest["path"]} --out {manifest["path"]}-int8
```

A collection keeps the embedder it was built with: re-ingest into a new collection after
switching models.
"""


def default_out(args: argparse.Namespace) -> Path:
    return common.output_dir(
        "embedder", args.name or f"minilm-{args.data.resolve().name}", args.version
    )


def train(args: argparse.Namespace) -> Path:
    """Runs the whole recipe; returns the output directory."""
    offline()

    if args.train_split == args.eval_split:
        raise SystemExit(f"--train-split and --eval-split are both '{args.eval_split}'")
    out: Path = args.out or default_out(args)
    if (out / "config.json").exists() and not args.overwrite:
        raise SystemExit(f"{out} already holds a model; pass --overwrite or another --out")
    if args.resume and not args.out and not args.version:
        raise SystemExit("--resume needs the --out (or --version) of the run to go on with")
    started = time.perf_counter()

    data, train_qrels, eval_qrels = common.training_splits(args)
    doc_ids = list(data.corpus)
    doc_texts = [data.corpus[d] for d in doc_ids]
    deepest = max(len(r) for r in train_qrels.values())

    common.seed_everything(args.seed)
    base = common.base_model_path(args.base)
    model = load_model(base, args.max_length, args.device)
    base_vectors = common.encode(model, doc_texts, args.eval_batch_size, "base model")
    before = retrieval_metrics(
        common.dense_rankings(
            model,
            doc_ids,
            base_vectors,
            {q: data.queries[q] for q in eval_qrels},
            100,
            args.eval_batch_size,
        ),
        eval_qrels,
    )
    print(f"base model on {args.eval_split}: {before}", flush=True)

    train_queries = {q: data.queries[q] for q in train_qrels}
    bm25_ranked = common.Bm25(data.corpus).search(
        list(train_queries.values()), args.bm25_negatives + deepest
    )
    bm25_negs = common.hard_negatives(
        dict(zip(train_queries, bm25_ranked, strict=True)), train_qrels, args.bm25_negatives
    )
    dense_negs = common.hard_negatives(
        common.dense_rankings(
            model,
            doc_ids,
            base_vectors,
            train_queries,
            args.dense_negatives + args.bm25_negatives + deepest,
            args.eval_batch_size,
        ),
        train_qrels,
        args.dense_negatives + args.bm25_negatives,
    )
    n_neg = args.bm25_negatives + args.dense_negatives
    # BM25's first, then the model's best that BM25 did not already give.
    negatives = common.merge_negatives(bm25_negs, dense_negs)
    items = examples(train_qrels, negatives, n_neg)
    if not items:
        raise SystemExit("no training example: the corpus is smaller than the negatives asked for")
    print(f"{len(items)} training examples, {n_neg} hard negatives each", flush=True)

    if args.resume and (out / CHECKPOINT / "config.json").is_file():
        model = load_model(str(out / CHECKPOINT), args.max_length, args.device)
    common.seed_everything(args.seed)
    train_stats = fit(model, items, data, args, out)
    after = retrieval_metrics(
        common.dense_rankings(
            model,
            doc_ids,
            common.encode(model, doc_texts, args.eval_batch_size, "fine-tuned model"),
            {q: data.queries[q] for q in eval_qrels},
            100,
            args.eval_batch_size,
        ),
        eval_qrels,
    )
    print(f"fine-tuned model on {args.eval_split}: {after}", flush=True)

    out.mkdir(parents=True, exist_ok=True)
    model.save(str(out))
    metrics = {
        "eval_split": args.eval_split,
        "eval_queries": len(eval_qrels),
        "before": before,
        "after": after,
        "train": train_stats,
    }
    manifest = {
        **common.manifest_head("embedder", args, out),
        "method": METHOD,
        "format": ["sentence-transformers"],
        "data": common.training_data(data, args, train_qrels),
        "params": common.run_params(args, "resume"),
        "metrics": metrics,
        "versions": common.library_versions(),
        "seconds": round(time.perf_counter() - started, 2),
    }
    common.write_outputs(out, metrics, manifest, model_card(manifest))
    shutil.rmtree(out / CHECKPOINT, ignore_errors=True)
    print(f"saved {out} in {manifest['seconds']} s", flush=True)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common.beir_training_parser(
        "embedder", "Fine-tune the MiniLM embedder on BEIR data with in-batch and hard negatives."
    )
    parser.add_argument("--resume", action="store_true", help="Go on from out/checkpoint/.")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-5, help="Peak learning rate.")
    parser.add_argument("--warmup-ratio", type=float, default=0.1)
    parser.add_argument("--scale", type=float, default=20.0, help="Similarity scale of the loss.")
    parser.add_argument("--max-length", type=int, default=256, help="Tokens per text.")
    parser.add_argument("--bm25-negatives", type=int, default=1, help="BM25 negatives per query.")
    parser.add_argument(
        "--dense-negatives", type=int, default=1, help="Base-model negatives per query."
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--max-queries", type=int, default=0, help="Train on the first N queries (0: all)."
    )
    parser.add_argument("--eval-batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N.")
    args = parser.parse_args(argv)
    for flag in ("epochs", "batch_size", "max_length", "eval_batch_size"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    for flag in ("bm25_negatives", "dense_negatives", "max_queries"):
        if getattr(args, flag) < 0:
            parser.error(f"--{flag.replace('_', '-')} must not be negative")
    if args.batch_size < 2:
        parser.error("--batch-size must be at least 2: the loss needs in-batch negatives")
    return args


def main(argv: list[str] | None = None) -> int:
    train(parse_args(argv))
    return 0
