"""Knowledge distillation of the generator: a student trained on
alpha*CE(labels) + beta*T^2*KL(student || teacher)
at temperature T, the teacher frozen in eval mode.

    python -m trainers.generator.distill --data data/grounding --teacher smollm2-grounded/v1 \\
        --student-layers 15 --name smollm2-grounded-distilled --version v1

Teacher: a registry version (a LoRA version is merged into its base as `<version>-merged`).
Student: a registry `hf` version with the same vocabulary (`--student`), or, with
`--student-layers N`, the teacher with N of its layers kept, evenly spaced (DistilBERT's
initialisation: a student that starts close to its teacher learns in few steps). Both terms
count assistant tokens only (trainers.generator.tokens). `--kl reverse` is KL(student ‖
teacher), the issue's choice, mode-seeking; `--kl forward` is Hinton's KL(teacher ‖ student).
The T² factor keeps the soft term's gradient scale independent of T. The held-out loss and
perplexity of teacher and student (before and after) go to metrics.json; the student is saved
as a registry version (format `hf`).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from trainers.data import loss_summary, seed_everything
from trainers.generator import version
from trainers.generator.data import add_row_arguments, read_jsonl
from trainers.generator.sft import evaluate
from trainers.generator.tokens import IGNORE, collate, encode_chat

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Distil a generator teacher into a student.")
    p.add_argument("--data", type=Path, required=True, help="folder with train/heldout.jsonl")
    p.add_argument("--teacher", required=True, help="registry name[/version]")
    p.add_argument("--student", default="", help="registry name[/version] of an hf student")
    p.add_argument("--student-layers", type=int, default=0, help="teacher with N layers kept")
    version.add_version_arguments(p, "smollm2-distilled", "v1")
    p.add_argument("--alpha", type=float, default=0.5, help="weight of CE on the labels")
    p.add_argument("--beta", type=float, default=0.5, help="weight of the KL term")
    p.add_argument("--temperature", type=float, default=2.0)
    p.add_argument("--kl", choices=["reverse", "forward"], default="reverse")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-4)
    add_row_arguments(p, 384)
    p.add_argument("--eval-batch-size", type=int, default=8)
    return p


def shrink(model: Any, layers: int) -> Any:
    """The model with `layers` of its decoder layers kept, evenly spaced, first and last
    included; the config follows."""
    import torch

    total = len(model.model.layers)
    if not 1 <= layers < total:
        raise SystemExit(f"--student-layers {layers}: choose 1 to {total - 1}")
    keep = sorted({round(i * (total - 1) / max(layers - 1, 1)) for i in range(layers)})
    model.model.layers = torch.nn.ModuleList([model.model.layers[i] for i in keep])
    for index, layer in enumerate(model.model.layers):
        layer.self_attn.layer_idx = index  # the KV cache is indexed by position in the stack
    model.config.num_hidden_layers = len(keep)
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = [model.config.layer_types[i] for i in keep]
    return model


def kd_loss(student_logits: Any, teacher_logits: Any, labels: Any, args: argparse.Namespace) -> Any:
    """alpha*CE + beta*T^2*KL over the positions whose next token is an assistant token."""
    import torch.nn.functional as F

    targets = labels[:, 1:]
    mask = targets != IGNORE
    s = student_logits[:, :-1][mask]
    t = teacher_logits[:, :-1][mask]
    ce = F.cross_entropy(s, targets[mask])
    log_s = F.log_softmax(s / args.temperature, dim=-1)
    log_t = F.log_softmax(t / args.temperature, dim=-1)
    if args.kl == "reverse":  # KL(student || teacher) = sum p_s (log p_s - log p_t)
        kl = (log_s.exp() * (log_s - log_t)).sum(-1).mean()
    else:  # KL(teacher ‖ student)
        kl = (log_t.exp() * (log_t - log_s)).sum(-1).mean()
    return args.alpha * ce + args.beta * args.temperature**2 * kl, ce, kl


def train(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    seed_everything(args.seed)
    teacher_entry = version.merged_version(args.teacher, args.models_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(teacher_entry.path))
    teacher = AutoModelForCausalLM.from_pretrained(str(teacher_entry.path), dtype=torch.float32)
    teacher.eval().requires_grad_(False)  # frozen: no dropout, no gradients
    if args.student:
        student_entry = version.merged_version(args.student, args.models_dir)
        student = AutoModelForCausalLM.from_pretrained(str(student_entry.path), dtype=torch.float32)
        student_name = student_entry.ref
    elif args.student_layers:
        student = AutoModelForCausalLM.from_pretrained(str(teacher_entry.path), dtype=torch.float32)
        student = shrink(student, args.student_layers)
        student_name = f"{teacher_entry.ref} with {args.student_layers} layers"
    else:
        raise SystemExit("name a student: --student NAME[/VERSION] or --student-layers N")
    if (
        student.get_output_embeddings().weight.shape[0]
        != teacher.get_output_embeddings().weight.shape[0]
    ):
        raise SystemExit("student and teacher vocabularies differ; distillation needs one")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def load(split: str, limit: int) -> list[Any]:
        rows = read_jsonl(args.data / f"{split}.jsonl")[: limit or None]
        encoded = [encode_chat(tokenizer, r["messages"], args.max_length) for r in rows]
        return [e for e in encoded if any(x != IGNORE for x in e[1])]

    train_data, eval_data = load("train", args.max_train), load("heldout", args.max_eval)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    teacher.to(device)
    student.to(device).train()
    teacher_eval = evaluate(teacher, eval_data, pad, args.eval_batch_size, device)
    before = evaluate(student, eval_data, pad, args.eval_batch_size, device)
    optimizer = torch.optim.AdamW(student.parameters(), lr=args.lr)
    steps = math.ceil(len(train_data) / args.batch_size) * args.epochs
    steps = min(steps, args.max_steps) if args.max_steps else steps
    losses: list[float] = []
    started = time.perf_counter()
    bar = tqdm(total=steps, desc="distill", unit="step")
    rng = random.Random(args.seed)
    while len(losses) < steps:
        order = list(range(len(train_data)))
        rng.shuffle(order)
        for k in range(0, len(order), args.batch_size):
            batch = collate([train_data[i] for i in order[k : k + args.batch_size]], pad)
            batch = {n: t.to(device) for n, t in batch.items()}
            inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
            with torch.no_grad():
                teacher_logits = teacher(**inputs).logits
            loss, ce, kl = kd_loss(student(**inputs).logits, teacher_logits, batch["labels"], args)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", ce=f"{ce.item():.3f}", kl=f"{kl.item():.3f}")
            if len(losses) >= steps:
                break
    bar.close()
    seconds = time.perf_counter() - started
    after = evaluate(student, eval_data, pad, args.eval_batch_size, device)
    return {
        "student": student,
        "tokenizer": tokenizer,
        "teacher": teacher_entry.ref,
        "student_name": student_name,
        "metrics": {
            "heldout": {"teacher": teacher_eval, "before": before, "after": after},
            "train": {"steps": len(losses), "seconds": round(seconds, 2), **loss_summary(losses)},
            "student_parameters": sum(p.numel() for p in student.parameters()),
            "teacher_parameters": sum(p.numel() for p in teacher.parameters()),
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out = version.new_version_dir(args)
    result = train(args)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    result["student"].save_pretrained(out)
    result["tokenizer"].save_pretrained(out)
    version.save_version(
        out,
        args,
        result["metrics"],
        [args.data / "train.jsonl", args.data / "heldout.jsonl"],
        base=result["student_name"],
        method=f"distillation from {result['teacher']} (alpha {args.alpha}, beta "
        f"{args.beta}, T {args.temperature}, KL {args.kl})",
        fmt="hf",
        teacher=result["teacher"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
