"""The guard model's training loop: the frozen bottom's token states computed once
(INT8 ONNX, fp16 in memory), then the trainable top layers and heads trained multi-task on
them with early stopping on the held-out loss (step 3 of trainers/guardrails/guard.py's recipe)."""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainers.data import EarlyStopping
from trainers.guardrails.guard_data import CATEGORIES, Example


def bottom_states(
    file: Path, ids: list[list[int]], threads: int, batch_size: int = 64
) -> list[np.ndarray]:
    """Each text's token states after the frozen layers, fp16, unpadded; INT8 ONNX. A text
    repeated (the sources trained on several times an epoch) is run once and its rows share
    one array."""
    from tqdm import tqdm

    from shared.models import runtime
    from shared.models.guard import pad

    session = runtime.session(file, threads, spinning=True)
    # With no frozen layer the bottom is the embeddings alone, which take no attention mask.
    inputs = {i.name for i in session.get_inputs()}
    first: dict[tuple[int, ...], int] = {}
    index = [first.setdefault(tuple(i), len(first)) for i in ids]
    unique = [list(key) for key in first]
    states_of: list[np.ndarray | None] = [None] * len(unique)
    order = np.argsort([-len(i) for i in unique], kind="stable")
    desc = f"frozen layers (INT8), {len(unique)} distinct of {len(ids)}"
    with tqdm(total=len(unique), desc=desc, unit="text", file=sys.stderr) as bar:
        for start in range(0, len(unique), batch_size):
            rows = order[start : start + batch_size]
            feeds = {k: v for k, v in pad([unique[i] for i in rows]).items() if k in inputs}
            states = session.run(None, feeds)[0]
            for j, i in enumerate(rows):
                states_of[i] = states[j, : len(unique[i])].astype(np.float16)
            bar.update(len(rows))
    return [states_of[i] for i in index]  # type: ignore[misc]


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
    bf16: bool = False,
) -> Any:
    """Mean loss of `rows`: binary cross-entropy per head over the rows labelled for it, and
    cross-entropy over hazard categories for unsafe rows. `bf16`: the layers run under bf16
    autocast (the losses in fp32)."""
    import torch

    width = int(t.lengths[rows].max())
    x = np.zeros((len(rows), width, states[0].shape[1]), dtype=np.float32)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for j, i in enumerate(rows):
        x[j, : t.lengths[i]] = states[i]
        mask[j, : t.lengths[i]] = 1
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model.guard_logits(torch.from_numpy(x), torch.from_numpy(mask))
    logits = logits.float()
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
                loss = batch_loss(model, states, t, rows, losses, args.category_weight, args.bf16)
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
