"""Direct Preference Optimization (trl's DPOTrainer) of the generator, as a LoRA adapter.

    python -m trainers.generator.dpo --data data/grounding --base smollm2-grounded/v1 \\
        --name smollm2-grounded --version v1-dpo

`--data` holds dpo_train.jsonl and dpo_heldout.jsonl (trainers.generator.data writes them):
conversational rows `{"prompt": [system, user], "chosen": [assistant], "rejected":
[assistant]}`. The policy is a fresh LoRA adapter on the starting model; the reference is
that starting model, frozen (peft's adapter switched off, which is what trl does when it gets
a peft config and no reference model). A LoRA starting point (an SFT version) is first merged
into its base as a registry version of its own (`<version>-merged`), which becomes the DPO
adapter's base, so the result serves by name like any other version.

Reported on the held-out pairs, after training: the mean reward margin
(β·[log π/π_ref(chosen) - log π/π_ref(rejected)]) and the share of pairs whose chosen answer
gets the higher reward (accuracy); both are 0 for the starting model by construction.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from shared.models import registry
from trainers.data import seed_everything
from trainers.generator import base as base_model
from trainers.generator.data import add_row_arguments, read_jsonl
from trainers.generator.version import (
    add_version_arguments,
    merged_version,
    new_version_dir,
    save_version,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="DPO (trl) of the generator as a LoRA adapter.")
    p.add_argument("--data", type=Path, required=True, help="folder with dpo_train/heldout.jsonl")
    p.add_argument("--base", default=base_model.REF, help="registry name[/version] or ref")
    add_version_arguments(p, "smollm2-grounded", "v1-dpo")
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--max-steps", type=int, default=-1)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--grad-accum", type=int, default=1)
    add_row_arguments(p, 384)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-alpha", type=int, default=32)
    p.add_argument("--target-modules", default="q_proj,k_proj,v_proj,o_proj")
    return p


def starting_point(ref: str, root: str | None) -> registry.Entry:
    """The hf registry entry DPO starts from (a LoRA version merged into its base first);
    the packaged base is registered on first use."""
    if ref == base_model.REF:
        base_model.ensure_base(root)
    return merged_version(ref, root, f"--base {ref.removeprefix('generator/')}: ")


def dataset(path: Path, limit: int) -> Any:
    from datasets import Dataset

    rows = read_jsonl(path)[: limit or None]
    keep = ("prompt", "chosen", "rejected")
    return Dataset.from_list([{k: r[k] for k in keep} for r in rows])


def train(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    seed_everything(args.seed)
    start = starting_point(args.base, args.models_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(start.path))
    model = AutoModelForCausalLM.from_pretrained(str(start.path), dtype=torch.float32)
    config = DPOConfig(
        output_dir=str(out / "trainer"),
        beta=args.beta,
        learning_rate=args.lr,
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        max_length=args.max_length,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=args.seed,
        use_cpu=not torch.cuda.is_available(),
    )
    peft_config = LoraConfig(
        r=args.lora_r,
        lora_alpha=args.lora_alpha,
        target_modules=[m.strip() for m in args.target_modules.split(",") if m.strip()],
        task_type="CAUSAL_LM",
    )
    trainer = DPOTrainer(
        model=model,
        args=config,
        train_dataset=dataset(args.data / "dpo_train.jsonl", args.max_train),
        eval_dataset=dataset(args.data / "dpo_heldout.jsonl", args.max_eval),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    started = time.perf_counter()
    result = trainer.train()
    seconds = time.perf_counter() - started
    evaluation = trainer.evaluate()
    trainer.model.save_pretrained(out)
    shutil.rmtree(out / "trainer", ignore_errors=True)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {
        "start": start,
        "metrics": {
            "heldout": {
                "reward_margin": round(float(evaluation.get("eval_rewards/margins", 0.0)), 4),
                "reward_accuracy": round(float(evaluation.get("eval_rewards/accuracies", 0.0)), 4),
                "loss": round(float(evaluation.get("eval_loss", 0.0)), 4),
            },
            "train": {
                "steps": int(result.global_step),
                "seconds": round(seconds, 2),
                "loss_first": round(losses[0], 4) if losses else None,
                "loss_last": round(losses[-1], 4) if losses else None,
            },
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out = new_version_dir(args)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    result = train(args, out)
    save_version(
        out,
        args,
        result["metrics"],
        [args.data / "dpo_train.jsonl", args.data / "dpo_heldout.jsonl"],
        base=result["start"].ref,
        method="dpo-lora",
        fmt="peft-lora",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
