"""Trains the guard model every guardrail classifier runs on: prompt injection / jailbreak,
content safety (unsafe + hazard category) and instructions planted in documents, as heads
on one MiniLM encoder, from the data that ships in the repository.

    python -m trainers.guardrails --all                        # shipped data, ~9 minutes on 2 cores
    python -m trainers.guardrails --all --data ../shared/data \\
        --in-domain ../shared/data/scifact --benign-docs ../shared/data/scifact/corpus.jsonl
    python -m trainers.guardrails --all --tiny --out /tmp/g    # seconds (tests)
    python -m trainers.guardrails --all --bf16                 # the top layers under bf16 autocast

Recipe (docs/benchmarks.md, "Guardrails", and its history have the figures behind each choice):
1. examples (trainers/guardrails/guard_data.py): every source split once into a part to
   train on and a held-out part (by passage for documents); beside the data sets, rows
   written for the project: benign requests with alarming words (sensitive_benign.py),
   contrastive safe/unsafe pairs (contrastive.py), e-mail, web, table and code passages
   (doc_domains.py) and instructions addressed to the assistant (indirect.py), planted at
   the start, middle or end of passages;
2. the packaged all-MiniLM-L6-v2's lower `--frozen-layers` layers (with `--frozen-layers 0`,
   as published, its embeddings alone) exported to ONNX and quantized to INT8; their token
   states for every training text computed once and kept in memory (fp16), once per
   distinct text (the repeated sources share them);
3. (guard_fit.py) the upper layers (a trainable copy) and the heads trained on those
   states: binary cross-entropy per head (each example only in the losses of the heads it is
   labelled for), cross-entropy over hazard categories for unsafe texts; AdamW, linear decay; the
   loss on held-out rows measured each half epoch, training stopped once it stops falling
   (`--patience`) and the best weights kept;
4. the served graph (shared/models/guard.py: embedding + logits) exported and quantized;
5. (guard_thresholds.py) each head's threshold chosen with that INT8 graph on the held-out
   part: the lowest at which every group of benign prompts (its sources pooled) stays within
   its false-positive budget and every large source within twice it; documents per domain,
   as whole passages (their worst window). `python -m trainers.guardrails.recalibrate`
   chooses them again for a trained model;
6. guard.json, tokenizer, metrics.json, manifest.json and a README.md card; with test
   splits present (`--data ../shared/data`), every head measured on them per source.

Deterministic for a seed: the same data and arguments give the same thresholds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from trainers.data import StageTimes, add_bf16_argument, add_early_stopping_arguments
from trainers.guardrails.guard_data import CATEGORIES, SHIPPED, Budget, build
from trainers.guardrails.guard_fit import bottom_states, train_heads
from trainers.guardrails.guard_thresholds import DOCUMENT_FPR, choose_thresholds

NAME = "guard-minilm"
HEAD_NAMES = ("injection", "unsafe", "document")
# Small sources seen several times an epoch (`--repeat` replaces these): deepset's injections
# are unlike the larger sets' (4x: held-out TPR 0.37 -> 0.48 with one trained layer), and
# Do-Not-Answer and SimpleSafetyTests phrase harm as plain questions.
DEFAULT_REPEATS = (
    ("prompt_injections/prompt_injections", 8),
    ("content_safety/do_not_answer", 2),
    ("content_safety/simple_safety_tests", 3),
)
EMBEDDING_DIR = "embedding"
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
PROVISIONAL = "guard.provisional.json"


def labels_layout() -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Logit names in graph order, and each head's place among them."""
    labels = ["injection", "unsafe", *(f"category:{c}" for c in CATEGORIES), "document"]
    heads = {
        "injection": {"logit": 0},
        "unsafe": {"logit": 1, "categories": {"first": 2, "names": list(CATEGORIES)}},
        "document": {"logit": 2 + len(CATEGORIES)},
    }
    return labels, heads


# -- the run --------------------------------------------------------------------------------


def default_out(args: argparse.Namespace) -> Path:
    from shared.models.registry import models_root

    version = args.version or datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return models_root() / "guardrails" / (args.name or NAME) / version


def budget_of(args: argparse.Namespace) -> Budget:
    if args.tiny:
        return Budget(
            per_source=12,
            passages_per_domain=6,
            planted_per_passage=1.0,
            holdout=0.3,
            indirect_share=args.indirect_share,
            generated_per_domain=6 if args.generated_per_domain else 0,
            contrastive=args.contrastive,
        )
    return Budget(
        per_source=args.per_source,
        passages_per_domain=args.passages_per_domain,
        planted_per_passage=args.planted_per_passage,
        holdout=args.holdout,
        caps=dict(args.cap or []),
        repeats=dict(DEFAULT_REPEATS if args.repeat is None else args.repeat),
        held_passages_per_domain=args.held_passages_per_domain,
        spare_held=args.spare_held,
        unsafe_not_injection=args.unsafe_not_injection,
        indirect_share=args.indirect_share,
        generated_per_domain=args.generated_per_domain,
        contrastive=args.contrastive,
    )


def write_embedding_encoder(model: Any, base: Path, target: Path, work: Path) -> None:
    """The packaged MiniLM alone, INT8, as an ONNX sentence-encoder directory (the model
    layer's OnnxEncoder loads it): the groundedness rail's encoder. Same weights and the same
    quantization as the guard graph's bottom and packaged top."""
    from shared.models.quantize import DEFAULT_VARIANT, copy_model_files, quantize_dynamic_variant
    from trainers.guardrails.guard_model import BaseHidden, export

    target.mkdir(parents=True, exist_ok=True)
    copy_model_files(base, target)
    export(BaseHidden(model), work / "embedding.onnx", ["last_hidden_state"])
    quantize_dynamic_variant(work / "embedding.onnx", target / "model_int8.onnx", DEFAULT_VARIANT)


def write_config(
    out: Path,
    thresholds: dict[str, float],
    args: argparse.Namespace,
    report: dict[str, Any],
    name: str = "",
) -> dict[str, Any]:
    from shared.models.guard import GUARD_FILE, GUARD_FORMAT

    labels, heads = labels_layout()
    for head in HEAD_NAMES:
        heads[head]["threshold"] = round(float(thresholds[head]), 6)
    heads["document"]["window_chars"] = 500
    config = {
        "format": GUARD_FORMAT,
        "onnx_file": "model_int8.onnx",
        "max_length": args.max_length,
        "labels": labels,
        "heads": heads,
        "score": "logits; a head flags a text when its logit >= its threshold",
        # The packaged MiniLM alone (the groundedness rail's sentence encoder).
        "embedding": {"path": EMBEDDING_DIR, "onnx_file": "model_int8.onnx"},
    }
    (out / (name or GUARD_FILE)).write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    return config


def train(args: argparse.Namespace) -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    from shared.models.guard import GUARD_FILE, GuardModel, encode, load_tokenizer
    from shared.models.quantize import DEFAULT_VARIANT, quantize_dynamic_variant
    from trainers.data import base_model_name, base_model_path, library_versions, run_params
    from trainers.guardrails.guard_model import Bottom, HeadSpec, Served, export
    from trainers.guardrails.guard_model import GuardModel as TorchGuard

    started = time.perf_counter()
    cpu_started = time.process_time()
    out: Path = args.out or default_out(args)
    if (out / GUARD_FILE).exists() and not args.overwrite:
        raise SystemExit(f"{out} already holds a model; pass --overwrite or another --out")
    threads = args.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    torch.manual_seed(args.seed)
    stages = StageTimes()
    in_domain = None
    if args.in_domain:
        from trainers.guardrails.in_domain import InDomain

        in_domain = InDomain.load(args.in_domain)
    data = build(
        args.data,
        budget_of(args),
        args.seed,
        in_domain.train if in_domain else None,
        args.benign_docs,
    )
    fit = data.fit
    print(
        f"data {args.data}: {len(fit)} training examples, {len(data.held)} held out "
        f"({len(data.held_passages)} held-out passages)",
        flush=True,
    )
    base = Path(base_model_path(args.base))
    tokenizer = load_tokenizer(base)
    ids = encode(tokenizer, [e.text for e in fit], args.max_length)
    specs = [
        HeadSpec("injection", 1),
        HeadSpec("unsafe", 1 + len(CATEGORIES)),
        HeadSpec("document", 1),
    ]
    model = TorchGuard.from_minilm(base, args.frozen_layers, specs, dropout=args.dropout)
    work = out / ".work"
    work.mkdir(parents=True, exist_ok=True)
    stages.start()
    export(Bottom(model), work / "bottom.onnx", ["states"])
    quantize_dynamic_variant(work / "bottom.onnx", work / "bottom_int8.onnx", DEFAULT_VARIANT)
    states = bottom_states(work / "bottom_int8.onnx", ids, threads)
    held = None
    if args.patience:
        # The held-out loss that early stopping reads: a fixed sample of the held-out part.
        pick = np.random.default_rng(args.seed).permutation(len(data.held))[: args.held_rows]
        held_examples = [data.held[i] for i in sorted(pick)]
        held_ids = encode(tokenizer, [e.text for e in held_examples], args.max_length)
        held = (bottom_states(work / "bottom_int8.onnx", held_ids, threads), held_examples)
    stages.lap("frozen_layers_s")
    stats = train_heads(model, states, fit, args, held)
    del states
    stages.lap("train_s")
    export(Served(model), out / "model.onnx", ["embedding", "logits"])
    quant = quantize_dynamic_variant(out / "model.onnx", out / "model_int8.onnx", DEFAULT_VARIANT)
    if not args.keep_fp32:
        (out / "model.onnx").unlink()
    write_embedding_encoder(model, base, out / EMBEDDING_DIR, work)
    shutil.rmtree(work)
    shutil.copy(base / "tokenizer.json", out / "tokenizer.json")
    labels, _ = labels_layout()
    # A provisional config under another name, so the runtime loads the graph for
    # calibration while no service takes the directory for a finished model.
    write_config(
        out,
        {h: math.inf for h in HEAD_NAMES},
        args,
        {h: {"threshold": None} for h in HEAD_NAMES},
        PROVISIONAL,
    )
    stages.lap("export_s")
    guard = GuardModel(out, threads=threads, config_name=PROVISIONAL)
    thresholds, calibration = choose_thresholds(guard, data, args)
    config = write_config(out, thresholds, args, calibration)
    (out / PROVISIONAL).unlink()
    guard = GuardModel(out, threads=threads)
    stages.lap("calibrate_s")
    print(json.dumps({k: v["threshold"] for k, v in calibration.items()}), flush=True)
    metrics: dict[str, Any] = {"calibration": calibration, "train": stats}
    if args.evaluate:
        from trainers.guardrails.guard_eval import evaluate

        metrics["test"] = evaluate(guard, args.test_data or args.data, args.seed)
        stages.lap("evaluate_s")
    seconds = round(time.perf_counter() - started, 1)
    metrics["seconds"] = seconds
    metrics["cpu_seconds"] = round(time.process_time() - cpu_started, 1)
    metrics["timings"] = stages.seconds
    manifest = {
        "role": "guardrails",
        "name": args.name or NAME,
        "version": args.version or out.name,
        "path": str(out),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "base": base_model_name() if not args.base else args.base,
        "command": getattr(args, "command", ""),
        "method": f"frozen bottom ({args.frozen_layers} of 6 layers, INT8 states cached), "
        f"top {6 - args.frozen_layers} layers and heads trained multi-task",
        "format": "ragrail-guard/1",
        "labels": labels,
        "heads": {h: config["heads"][h] for h in HEAD_NAMES},
        "data": {
            "path": str(args.data),
            "sources": data.sources,
            "in_domain": str(args.in_domain or ""),
            "benign_docs": str(args.benign_docs or ""),
        },
        "quantization": quant,
        "params": run_params(args),
        "metrics": metrics,
        "versions": library_versions(),
        "seconds": seconds,
    }
    from shared.models.registry import write_manifest
    from trainers.guardrails.guard_card import guard_card

    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    (out / "README.md").write_text(guard_card(manifest), encoding="utf-8")
    # Last: a directory with a manifest is a finished model (services take the newest).
    write_manifest(out, manifest)
    print(f"saved {out} in {seconds} s ({stages.seconds})", flush=True)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m trainers.guardrails",
        description="Train the guard model (injection, content safety, planted instructions in "
        "documents: heads on one MiniLM) from the shipped data or ../shared/data.",
    )
    parser.add_argument(
        "--all", action="store_true", help="(this recipe; kept for older command lines)"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=SHIPPED,
        help="Data root laid out as ../shared/data (default: the shipped "
        "trainers/guardrails/training_data/).",
    )
    parser.add_argument(
        "--out", type=Path, help="Default models/guardrails/guard-minilm/<version>/."
    )
    parser.add_argument("--name", default="")
    parser.add_argument("--version", default="")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--base", default="", help="Base model dir (default: packaged MiniLM).")
    parser.add_argument(
        "--in-domain",
        type=Path,
        help="BEIR dir: its train-qrels queries are "
        "benign in-domain questions (trained on, thresholds hold them too).",
    )
    parser.add_argument(
        "--benign-docs",
        type=Path,
        help="Benign documents (.jsonl corpus) added as a document domain.",
    )
    # Two trained layers, two epochs of 64 with early stopping on the held-out loss: the
    # 2026.11.26 recipe. The published model (2026.12.05) trains the whole encoder
    # (--frozen-layers 0: unsafe recall 0.924 -> 0.965 on the test splits against three trained
    # layers) with --dropout 0.2 --bf16 and the issue-28 data below; its full command is in
    # published/manifest.json, which bench/retrain.py reruns (docs/benchmarks.md, "Guardrails").
    parser.add_argument("--frozen-layers", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1.4e-4, help="Rate of the trained layers.")
    parser.add_argument("--head-lr", type=float, default=2.8e-3)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--category-weight", type=float, default=0.5)
    add_bf16_argument(parser, "Train the top layers", "the held-out loss and export")
    add_early_stopping_arguments(parser, patience=2, held_rows=2048, rows="rows")
    parser.add_argument("--per-source", type=int, default=0, help="Most rows per source (0: all).")
    for flag, what in (
        ("--cap", "Train on at most N of a source's rows"),
        ("--repeat", "Train on a source's rows N times (held-out rows are not repeated)"),
    ):
        parser.add_argument(
            flag,
            nargs=2,
            action="append",
            metavar=("SOURCE", "N"),
            type=lambda s: int(s) if s.isdigit() else s,
            help=f"{what}; SOURCE as <set>/<source>, e.g. prompt_injections/prompt_injections.",
        )
    parser.add_argument("--passages-per-domain", type=int, default=300)
    parser.add_argument("--planted-per-passage", type=float, default=1.0)
    parser.add_argument("--holdout", type=float, default=0.2)
    # Issue 28: documents as documents. Instructions addressed to the assistant planted in a
    # share of the passages (at the start, middle or end), generated e-mail, web, table and
    # code passages whose imperatives speak to a human reader, the contrastive safety pairs
    # (contrastive.py), and more held-out passages to calibrate on. Off by default (the
    # 2026.11.26 recipe); the published model passes --indirect-share 0.4
    # --generated-per-domain 300 --held-passages-per-domain 150 --contrastive.
    parser.add_argument("--indirect-share", type=float, default=0.0)
    parser.add_argument("--generated-per-domain", type=int, default=0)
    parser.add_argument("--held-passages-per-domain", type=int, default=0)
    parser.add_argument(
        "--spare-held",
        type=int,
        default=0,
        help="With --held-passages-per-domain: up to N more passages per domain held out, of "
        "those the training cap leaves out (more rows to choose the document threshold on; "
        "what is trained on does not change).",
    )
    parser.add_argument("--contrastive", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument(
        "--unsafe-not-injection",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="Train the injection head on content_safety's unsafe rows as not injections "
        "(direct harmful requests), so a content_safety.categories filter can let a category "
        "through (docs/benchmarks.md, Guardrails: measured, not published).",
    )
    parser.add_argument("--document-fpr", type=float, default=DOCUMENT_FPR)
    parser.add_argument(
        "--margin", type=float, default=0.0, help="Added to every chosen threshold."
    )
    parser.add_argument(
        "--evaluate",
        action="store_true",
        help="Measure on the test splits of --test-data (every source apart).",
    )
    parser.add_argument(
        "--test-data",
        type=Path,
        default=SHARED_DATA if SHARED_DATA.is_dir() else None,
        help="Data root with test splits, laid out as ../shared/data (default: ../shared/data "
        "when present, else --data).",
    )
    parser.add_argument("--keep-fp32", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="A few rows per source (tests).")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)
    if not 0 <= args.frozen_layers <= 6:
        parser.error("--frozen-layers must be 0..6 (6: heads only)")
    return args


def main(argv: list[str] | None = None) -> int:
    from trainers.data import command_line

    args = parse_args(argv)
    args.command = command_line("trainers.guardrails", argv)
    train(args)
    return 0
