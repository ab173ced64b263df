"""Trains the guard model every guardrail classifier runs on: prompt injection / jailbreak,
content safety (unsafe + hazard category) and instructions planted in documents, as heads
on one MiniLM encoder, from the data that ships in the repository.

    python -m trainers.guardrails --all                        # shipped data, ~9 minutes on 2 cores
    python -m trainers.guardrails --all --data ../shared/data \\
        --in-domain ../shared/data/scifact --benign-docs ../shared/data/scifact/corpus.jsonl
    python -m trainers.guardrails --all --tiny --out /tmp/g    # seconds (tests)

Recipe (trainers/guardrails/README.md has the figures behind each choice):
1. examples (trainers/guardrails/guard_data.py): every source split once into a part to
   train on and a held-out part (by passage for documents); beside the data sets, rows
   written for the project: benign requests with alarming words (sensitive_benign.py),
   contrastive safe/unsafe pairs (contrastive.py), e-mail, web, table and code passages
   (doc_domains.py) and instructions addressed to the assistant (indirect.py), planted at
   the start, middle or end of passages;
2. the packaged all-MiniLM-L6-v2's lower `--frozen-layers` layers exported to ONNX and
   quantized to INT8; their token states for every training text computed once and kept in
   memory (fp16);
3. the upper layers (a trainable copy) and the heads trained on those states: binary
   cross-entropy per head (each example only in the losses of the heads it is labelled
   for), cross-entropy over hazard categories for unsafe texts; AdamW, linear decay; the
   loss on held-out rows measured each half epoch, training stopped once it stops falling
   (`--patience`) and the best weights kept;
4. the served graph (shared/models/guard.py: embedding + logits) exported and quantized;
5. each head's threshold chosen with that INT8 graph on the held-out part: the lowest at
   which every group of benign text stays within its own false-positive target (chit-chat
   none at all); documents per domain, as whole passages (their worst window);
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
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from trainers.data import EarlyStopping, add_early_stopping_arguments
from trainers.guardrails.guard_data import (
    CATEGORIES,
    SHIPPED,
    Budget,
    Example,
    GuardData,
    build,
)
from trainers.guardrails.scoring import threshold_at_fpr

NAME = "guard-minilm"
HEAD_NAMES = ("injection", "unsafe", "document")
# False-positive targets per group of held-out benign text, per head. `sensitive` is the
# ordinary requests that contain words such as kill or bomb, and benign security requests
# that sound malicious; `lookalikes` benign requests about passwords, roles, instructions.
TARGETS: dict[str, dict[str, float]] = {
    "injection": {"instructions": 0.005, "questions": 0.005, "chitchat": 0.0, "in_domain": 0.005},
    "unsafe": {
        "instructions": 0.005,
        "questions": 0.005,
        "chitchat": 0.0,
        "in_domain": 0.005,
        "sensitive": 0.02,
    },
}
# Groups measured on held-out data but not held to a target: benign requests built to look
# like injections (passwords, roles, "instructions"), deepset's benign prompts. Holding the
# threshold to a few dozen deliberately hard rows set it by one or two of them (measured:
# unsafe recall 0.58 at the threshold they gave against 0.8 without).
DOCUMENT_FPR = 0.01
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


# -- token states of the frozen bottom -----------------------------------------------------


def bottom_states(
    file: Path, ids: list[list[int]], threads: int, batch_size: int = 64
) -> list[np.ndarray]:
    """Each text's token states after the frozen layers, fp16, unpadded; INT8 ONNX."""
    from tqdm import tqdm

    from shared.models import runtime
    from shared.models.guard import pad

    session = runtime.session(file, threads, spinning=True)
    out: list[np.ndarray | None] = [None] * len(ids)
    order = np.argsort([-len(i) for i in ids], kind="stable")
    with tqdm(total=len(ids), desc="frozen layers (INT8)", unit="text", file=sys.stderr) as bar:
        for start in range(0, len(ids), batch_size):
            rows = order[start : start + batch_size]
            feeds = pad([ids[i] for i in rows])
            states = session.run(None, feeds)[0]
            for j, i in enumerate(rows):
                out[i] = states[j, : len(ids[i])].astype(np.float16)
            bar.update(len(rows))
    return out  # type: ignore[return-value]


def batches_by_length(lengths: np.ndarray, size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Rows in batches of similar length (little padding), in random order; lengths are
    jittered so batches differ from epoch to epoch."""
    jitter = lengths + rng.uniform(0, 8, len(lengths))
    order = np.argsort(jitter, kind="stable")
    batches = [order[i : i + size] for i in range(0, len(order), size)]
    rng.shuffle(batches)  # type: ignore[arg-type]
    return batches


@dataclass
class Targets:
    """Per-example labels for the heads (-1: not labelled for that head), and lengths."""

    inj: np.ndarray
    uns: np.ndarray
    cat: np.ndarray
    doc: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, examples: list[Example], states: list[np.ndarray]) -> Targets:
        return cls(
            np.array([e.injection for e in examples], dtype=np.float32),
            np.array([e.unsafe for e in examples], dtype=np.float32),
            np.array([e.category for e in examples], dtype=np.int64),
            np.array([e.document for e in examples], dtype=np.float32),
            np.array([len(s) for s in states]),
        )


def batch_loss(
    model: Any,
    states: list[np.ndarray],
    t: Targets,
    rows: np.ndarray,
    losses: dict[str, Any],
    category_weight: float,
) -> Any:
    """Mean loss of `rows`: binary cross-entropy per head over the rows labelled for it, and
    cross-entropy over hazard categories for unsafe rows."""
    import torch

    width = int(t.lengths[rows].max())
    x = np.zeros((len(rows), width, states[0].shape[1]), dtype=np.float32)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for j, i in enumerate(rows):
        x[j, : t.lengths[i]] = states[i]
        mask[j, : t.lengths[i]] = 1
    logits = model.guard_logits(torch.from_numpy(x), torch.from_numpy(mask))
    first = 2 + len(CATEGORIES)
    loss = torch.zeros(())
    heads = (("injection", 0, t.inj), ("unsafe", 1, t.uns), ("document", first, t.doc))
    for name, column, y in heads:
        keep = np.flatnonzero(y[rows] >= 0)
        if len(keep):
            target = torch.from_numpy(y[rows][keep])
            loss = loss + losses[name](logits[torch.from_numpy(keep), column], target)
    keep = np.flatnonzero(t.cat[rows] >= 0)
    if len(keep):
        part = logits[torch.from_numpy(keep), 2:first]
        target = torch.from_numpy(t.cat[rows][keep])
        loss = loss + category_weight * losses["category"](part, target)
    return loss / len(rows)


def held_loss(
    model: Any, states: list[np.ndarray], t: Targets, losses: dict[str, Any], args: Any
) -> float:
    """Mean loss on held-out rows, no dropout, in batches of similar length."""
    import torch

    model.eval()
    total = 0.0
    order = np.argsort(t.lengths, kind="stable")
    with torch.no_grad():
        for start in range(0, len(order), 128):
            rows = order[start : start + 128]
            loss = batch_loss(model, states, t, rows, losses, args.category_weight)
            total += float(loss) * len(rows)
    model.train()
    return total / max(len(order), 1)


def trained_state(model: Any) -> dict[str, Any]:
    """The weights training changes: the guard top and the heads."""
    return {"guard_top": model.guard_top.state_dict(), "heads": model.heads.state_dict()}


def train_heads(
    model: Any,
    states: list[np.ndarray],
    examples: list[Example],
    args: argparse.Namespace,
    held: tuple[list[np.ndarray], list[Example]] | None = None,
) -> dict[str, Any]:
    """Trains the guard top and heads in place on cached states; returns statistics. With
    `held` (states and examples never trained on) and --patience, the held-out loss is
    measured every --eval-every steps and training stops once it has not improved for
    --patience measurements; the weights of the best measurement are kept."""
    import torch
    from tqdm import tqdm

    n = len(examples)
    t = Targets.of(examples, states)

    def pos_weight(y: np.ndarray) -> float:
        pos, neg = float((y == 1).sum()), float((y == 0).sum())
        # Square root of the imbalance: full balancing pushed benign scores up (more false
        # positives at the threshold) for little gain in recall.
        return math.sqrt(neg / pos) if pos else 1.0

    weights = {
        "injection": pos_weight(t.inj),
        "unsafe": pos_weight(t.uns),
        "document": pos_weight(t.doc),
    }
    losses: dict[str, Any] = {
        k: torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(v), reduction="sum")
        for k, v in weights.items()
    }
    losses["category"] = torch.nn.CrossEntropyLoss(reduction="sum")
    layer_params = [p for p in model.guard_top.parameters()]
    head_params = [p for p in model.heads.parameters()]
    optimizer = torch.optim.AdamW(
        [{"params": layer_params, "lr": args.lr}, {"params": head_params, "lr": args.head_lr}],
        weight_decay=0.01,
    )
    rng = np.random.default_rng(args.seed)
    steps_per_epoch = math.ceil(n / args.batch_size)
    total = steps_per_epoch * args.epochs
    warmup = max(1, int(0.06 * total))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup)))
    )
    held_t = Targets.of(held[1], held[0]) if held and args.patience else None
    every = args.eval_every or max(1, steps_per_epoch // 2)
    stopping = EarlyStopping(args.patience)
    train_losses: list[float] = []
    started = time.perf_counter()
    step = 0
    model.train()
    with tqdm(total=total, desc="train guard heads", unit="step", file=sys.stderr) as bar:
        for _ in range(args.epochs):
            for rows in batches_by_length(t.lengths, args.batch_size, rng):
                loss = batch_loss(model, states, t, rows, losses, args.category_weight)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(layer_params + head_params, 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                train_losses.append(float(loss.detach()))
                step += 1
                bar.set_postfix(loss=f"{np.mean(train_losses[-20:]):.4f}")
                bar.update()
                if held_t is None or (step % every and step != total):
                    continue
                value = held_loss(model, held[0], held_t, losses, args)  # type: ignore[index]
                stopping.observe(step, value, lambda: trained_state(model))
                if stopping.stop:
                    break
            else:
                continue
            break
    if stopping.best_state is not None:
        model.guard_top.load_state_dict(stopping.best_state["guard_top"])
        model.heads.load_state_dict(stopping.best_state["heads"])
    model.eval()
    window = max(1, min(20, len(train_losses) // 4))
    return {
        "examples": n,
        "steps": step,
        "of_steps": total,
        "pos_weight": {k: round(v, 3) for k, v in weights.items()},
        "loss_first": round(float(np.mean(train_losses[:window])), 5),
        "loss_last": round(float(np.mean(train_losses[-window:])), 5),
        "held_loss": stopping.curve,
        "kept_step": stopping.best_step if stopping.best_state is not None else step,
        "seconds": round(time.perf_counter() - started, 1),
    }


# -- thresholds -----------------------------------------------------------------------------


def choose_thresholds(
    guard: Any, data: GuardData, args: argparse.Namespace
) -> tuple[dict[str, float], dict[str, Any]]:
    """Per head, the lowest threshold keeping every held-out benign group within its target."""
    prompts = [e for e in data.held if e.document < 0]
    scores = guard.score([e.text for e in prompts]).logits
    thresholds: dict[str, float] = {}
    report: dict[str, Any] = {}
    for name, column in (("injection", 0), ("unsafe", 1)):
        attr = "injection" if name == "injection" else "unsafe"
        labelled = [(i, e) for i, e in enumerate(prompts) if getattr(e, attr) >= 0]
        groups: dict[str, list[float]] = defaultdict(list)
        positives: dict[str, list[float]] = defaultdict(list)
        for i, e in labelled:
            if getattr(e, attr) == 0:
                groups[e.group].append(float(scores[i, column]))
            else:
                positives[e.source].append(float(scores[i, column]))
        per_group = {}
        threshold = -math.inf
        for group, values in sorted(groups.items()):
            per_group[group] = {"n": len(values)}
            if group not in TARGETS[name]:
                continue  # measured only
            target = TARGETS[name][group]
            v = np.asarray(values, dtype=np.float32)
            t = threshold_at_fpr(v, np.zeros(len(v), dtype=np.int8), target)
            per_group[group].update(target_fpr=target, threshold=round(t, 4))
            threshold = max(threshold, t)
        threshold = (threshold if math.isfinite(threshold) else 0.0) + args.margin
        for group, values in groups.items():
            v = np.asarray(values)
            per_group[group]["fpr"] = round(float((v >= threshold).mean()), 4)
        report[name] = {
            "threshold": round(threshold, 4),
            "groups": per_group,
            "held_out_tpr": {
                s: {"n": len(v), "tpr": round(float((np.asarray(v) >= threshold).mean()), 4)}
                for s, v in sorted(positives.items())
            },
        }
        thresholds[name] = threshold

    # Documents: whole held-out passages, each as its worst window, per domain.
    domains: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for domain, text, planted in data.held_passages:
        domains[domain].append((text, planted))
    flat = [(d, t, p) for d, items in sorted(domains.items()) for t, p in items]
    passage_scores = guard.document_scores([t for _, t, _ in flat])
    threshold = -math.inf
    per_domain: dict[str, Any] = {}
    for domain in sorted(domains):
        rows = [i for i, (d, _, p) in enumerate(flat) if d == domain and p == 0]
        v = passage_scores[rows]
        t = threshold_at_fpr(v, np.zeros(len(v), dtype=np.int8), args.document_fpr)
        per_domain[domain] = {"benign": len(v), "threshold": round(t, 4)}
        threshold = max(threshold, t)
    threshold += args.margin
    for domain in sorted(domains):
        benign = passage_scores[[i for i, (d, _, p) in enumerate(flat) if d == domain and p == 0]]
        planted = passage_scores[[i for i, (d, _, p) in enumerate(flat) if d == domain and p == 1]]
        per_domain[domain]["dropped"] = round(float((benign >= threshold).mean()), 4)
        if len(planted):
            per_domain[domain]["planted"] = len(planted)
            per_domain[domain]["caught"] = round(float((planted >= threshold).mean()), 4)
    thresholds["document"] = threshold
    report["document"] = {
        "threshold": round(threshold, 4),
        "target_fpr": args.document_fpr,
        "domains": per_domain,
    }
    return thresholds, report


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
    timings: dict[str, float] = {}

    def lap(name: str, since: float) -> float:
        now = time.perf_counter()
        timings[name] = round(now - since, 1)
        return now

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
    t = time.perf_counter()
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
    t = lap("frozen_layers_s", t)
    stats = train_heads(model, states, fit, args, held)
    del states
    t = lap("train_s", t)
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
    t = lap("export_s", t)
    guard = GuardModel(out, threads=threads, config_name=PROVISIONAL)
    thresholds, calibration = choose_thresholds(guard, data, args)
    config = write_config(out, thresholds, args, calibration)
    (out / PROVISIONAL).unlink()
    guard = GuardModel(out, threads=threads)
    t = lap("calibrate_s", t)
    print(json.dumps({k: v["threshold"] for k, v in calibration.items()}), flush=True)
    metrics: dict[str, Any] = {"calibration": calibration, "train": stats}
    if args.evaluate:
        from trainers.guardrails.guard_eval import evaluate

        metrics["test"] = evaluate(guard, args.test_data or args.data, args.seed)
        t = lap("evaluate_s", t)
    seconds = round(time.perf_counter() - started, 1)
    metrics["seconds"] = seconds
    metrics["cpu_seconds"] = round(time.process_time() - cpu_started, 1)
    metrics["timings"] = timings
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
    print(f"saved {out} in {seconds} s ({timings})", flush=True)
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
    # published model's recipe (docs/benchmarks.md, "Published models"; the recipes measured
    # against each other are there too).
    parser.add_argument("--frozen-layers", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1.4e-4, help="Rate of the trained layers.")
    parser.add_argument("--head-lr", type=float, default=2.8e-3)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--category-weight", type=float, default=0.5)
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
    # (contrastive.py), and more held-out passages to calibrate on. Off by default: the
    # defaults stay the published recipe's (2026.11.26), which bench/retrain.py reproduces;
    # the issue-28 run (docs/benchmarks.md, "Guardrails round two") passed --indirect-share
    # 0.4 --generated-per-domain 300 --held-passages-per-domain 150 --contrastive.
    parser.add_argument("--indirect-share", type=float, default=0.0)
    parser.add_argument("--generated-per-domain", type=int, default=0)
    parser.add_argument("--held-passages-per-domain", type=int, default=0)
    parser.add_argument("--contrastive", action=argparse.BooleanOptionalAction, default=False)
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
