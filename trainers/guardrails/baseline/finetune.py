"""Full fine-tuning: the MiniLM encoder and a linear head on its normalised mean-pooled
embedding, trained together with binary cross-entropy. The result has the same shape as the
frozen recipe (sentence-transformers encoder + LinearHead), so both export and serve alike."""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from trainers.data import loss_summary, shuffled_steps
from trainers.guardrails.baseline.head import LinearHead
from trainers.guardrails.scoring import Labelled


def finetune(
    model: Any, data: Labelled, args: argparse.Namespace, pos_weight: float | None = None
) -> tuple[LinearHead, dict]:
    """Trains `model` (a SentenceTransformer ending in Normalize) in place; returns the head
    and the training statistics. `pos_weight` weighs each injection in the loss (default:
    benign rows per injection in `data`, which balances the classes)."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    dimension = model.get_embedding_dimension()
    head = torch.nn.Linear(dimension, 1)
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    # A fresh head on unit vectors needs a far larger rate than the pretrained encoder.
    optimizer = torch.optim.AdamW(
        [
            {"params": model.parameters(), "lr": args.lr},
            {"params": head.parameters(), "lr": args.head_lr},
        ],
        weight_decay=0.01,
    )
    n = len(data.texts)
    steps_per_epoch = math.ceil(n / args.batch_size)
    total = steps_per_epoch * args.epochs
    scheduler = get_linear_schedule_with_warmup(optimizer, int(total * args.warmup_ratio), total)
    positives = max(data.positives, 1)
    weight = (n - positives) / positives if pos_weight is None else pos_weight
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(weight))
    losses: list[float] = []
    started = time.perf_counter()
    model.train()
    for batch in shuffled_steps(n, args, "fine-tune", losses):
        features = model.tokenize([data.texts[i] for i in batch])
        features = {k: v.to(model.device) if hasattr(v, "to") else v for k, v in features.items()}
        vectors = model(features)["sentence_embedding"]
        logits = head(vectors).squeeze(-1)
        labels = torch.tensor(data.labels[batch].astype(np.float32))
        loss = loss_fn(logits, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()) + list(head.parameters()), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    model.eval()
    linear = LinearHead(
        head.weight.detach().numpy()[0].astype(np.float32), float(head.bias.detach()[0])
    )
    return linear, {
        "examples": n,
        "pos_weight": round(float(weight), 4),
        "steps": total,
        "seconds": round(time.perf_counter() - started, 2),
        **loss_summary(losses),
    }
