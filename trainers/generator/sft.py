"""Supervised fine-tuning of the generator on chat JSONL, full or LoRA (QLoRA on a GPU).

    python -m trainers.generator.data --out data/grounding          # the grounding set
    python -m trainers.generator.sft --data data/grounding --name smollm2-grounded --version v1
    python -m trainers.generator.sft --data data/grounding --name x --version v2 --resume

`--data` holds train.jsonl and heldout.jsonl, rows `{"messages": [...]}`. The loss counts the
assistant turns only (system and user tokens are labelled -100). `--pack` concatenates whole
examples into `--max-length` sequences; `--grad-accum` micro-batches make one optimizer step.
Held-out loss and perplexity (over assistant tokens) are measured before and after training.
A checkpoint (trainable weights, optimizer, scheduler, step) is written every `--save-every`
optimizer steps and at the end of each epoch; `--resume` goes on from it with the same data
order. The base is a registry reference (default generator/smollm2-135m-instruct/base,
converted from the packaged GGUF on first use) or a model directory.

Output, `models/generator/<name>/<version>/` unless `--out`: a peft adapter (format
`peft-lora`, whose manifest names its base, so RAGRAIL_GENERATOR_REGISTRY_MODEL=<name>/<version>
serves it) or, with `--method full`, a whole model (format `hf`); metrics.json, manifest.json
and a README.md model card. The loop runs under accelerate, so `accelerate launch` or
`torchrun` run it on several GPUs or nodes unchanged (trainers/generator/README.md).
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

from shared.models import registry
from trainers.data import library_versions, loss_summary, run_params, seed_everything
from trainers.generator import base as base_model
from trainers.generator.data import add_row_arguments, files_sha256, read_jsonl
from trainers.generator.tokens import IGNORE, collate, encode_chat, pack
from trainers.generator.version import add_version_arguments

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever downloaded
CHECKPOINT = "checkpoint"
QLORA_NEEDS_GPU = (
    "--qlora loads the base model in 4-bit NF4 through bitsandbytes, which needs a CUDA GPU, "
    "and none is present here. Train LoRA instead (the default --method lora, same adapter "
    "format), or run this on a machine with a GPU."
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="SFT (full or LoRA) of the generator on chat JSONL.")
    p.add_argument("--data", type=Path, required=True, help="folder with train/heldout.jsonl")
    p.add_argument("--base", default=base_model.REF, help="registry ref or model directory")
    add_version_arguments(p, "smollm2-grounded", "v1", "--out")
    p.add_argument("--out", type=Path, default=None, help="default: the registry version dir")
    p.add_argument("--method", choices=["lora", "full"], default="lora")
    p.add_argument("--qlora", action="store_true", help="LoRA on a 4-bit NF4 base (GPU only)")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-alpha", type=int, default=32)
    p.add_argument("--lora-dropout", type=float, default=0.05)
    p.add_argument(
        "--target-modules",
        default="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
        help="comma-separated module names LoRA adapts",
    )
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: off)")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--warmup-ratio", type=float, default=0.05)
    add_row_arguments(p, 512)
    p.add_argument("--pack", action="store_true", help="pack examples into max-length rows")
    p.add_argument("--eval-batch-size", type=int, default=8)
    p.add_argument("--skip-before", action="store_true", help="no held-out eval before training")
    p.add_argument("--save-every", type=int, default=50, help="checkpoint every N steps")
    p.add_argument("--resume", action="store_true", help="go on from the checkpoint in --out")
    p.add_argument(
        "--stop-after",
        type=int,
        default=0,
        help="end the run after N steps leaving its checkpoint, as an interruption would "
        "(a time-boxed session; --resume finishes it)",
    )
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    return p


# -- model ----------------------------------------------------------------------------------


def resolve_base(base: str, models_dir: str | None) -> tuple[Path, str]:
    """(directory, how the manifest names it): a registry ref or a model directory."""
    if Path(base).is_dir():
        return Path(base), str(base)
    if base == base_model.REF:
        return base_model.ensure_base(models_dir), base
    try:
        return registry.resolve_ref(base, models_dir).path, base
    except registry.RegistryError as exc:
        raise SystemExit(f"--base {base}: {exc}") from exc


def load_model(path: Path, args: argparse.Namespace) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if tokenizer.chat_template is None:
        raise SystemExit(f"{path} has no chat template; SFT on chat data needs an instruct base")
    extra: dict[str, Any] = {}
    if args.qlora:
        if not torch.cuda.is_available():
            raise SystemExit(QLORA_NEEDS_GPU)
        try:
            from transformers import BitsAndBytesConfig
        except ImportError as exc:  # pragma: no cover - GPU machines only
            raise SystemExit("--qlora needs bitsandbytes: pip install bitsandbytes") from exc
        extra["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
        )
    model = AutoModelForCausalLM.from_pretrained(
        str(path), dtype=torch.float32, local_files_only=True, **extra
    )
    if args.method == "lora" or args.qlora:
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

        if args.qlora:
            model = prepare_model_for_kbit_training(model)
        config = LoraConfig(
            r=args.lora_r,
            lora_alpha=args.lora_alpha,
            lora_dropout=args.lora_dropout,
            target_modules=[m.strip() for m in args.target_modules.split(",") if m.strip()],
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, config)
    return model, tokenizer


def trainable_state(model: Any) -> dict[str, Any]:
    return {n: p.detach().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}


# -- data -----------------------------------------------------------------------------------


def examples(
    path: Path, tokenizer: Any, args: argparse.Namespace, limit: int
) -> list[tuple[list[int], list[int]]]:
    rows = read_jsonl(path)[: limit or None]
    encoded = [encode_chat(tokenizer, r["messages"], args.max_length) for r in rows]
    return [e for e in encoded if any(label != IGNORE for label in e[1])]


def batches(data: list[Any], size: int, epoch: int, seed: int) -> list[list[Any]]:
    """The epoch's batches in an order fixed by seed and epoch, so a resumed run sees the same."""
    order = list(range(len(data)))
    random.Random(seed * 1000 + epoch).shuffle(order)
    return [[data[i] for i in order[k : k + size]] for k in range(0, len(order), size)]


# -- evaluation -----------------------------------------------------------------------------


def evaluate(model: Any, data: list[Any], pad_id: int, batch_size: int, device: Any) -> dict:
    """Mean negative log-likelihood of the assistant tokens and its perplexity."""
    import torch
    import torch.nn.functional as F

    if not data:
        return {}
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for k in range(0, len(data), batch_size):
            batch = {n: t.to(device) for n, t in collate(data[k : k + batch_size], pad_id).items()}
            logits = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).logits
            labels = batch["labels"][:, 1:]
            total += F.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                labels.reshape(-1),
                ignore_index=IGNORE,
                reduction="sum",
            ).item()
            count += int((labels != IGNORE).sum())
    model.train()
    loss = total / count
    return {"loss": round(loss, 6), "perplexity": round(math.exp(loss), 4), "tokens": count}


# -- training -------------------------------------------------------------------------------


def train(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from accelerate import Accelerator
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    seed_everything(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    base_dir, base_name = resolve_base(args.base, args.models_dir)
    model, tokenizer = load_model(base_dir, args)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    train_data = examples(args.data / "train.jsonl", tokenizer, args, args.max_train)
    eval_data = examples(args.data / "heldout.jsonl", tokenizer, args, args.max_eval)
    if not train_data:
        raise SystemExit(f"{args.data / 'train.jsonl'} holds no example with an assistant turn")
    rows = pack(train_data, args.max_length) if args.pack else train_data

    accelerator = Accelerator(gradient_accumulation_steps=args.grad_accum)
    device = accelerator.device
    # Under accelerate launch / torchrun each process takes every num_processes-th batch.
    shards = accelerator.num_processes
    steps_per_epoch = math.ceil(math.ceil(len(rows) / args.batch_size / shards) / args.grad_accum)
    total_steps = steps_per_epoch * args.epochs
    if args.max_steps:
        total_steps = min(total_steps, args.max_steps)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(total_steps * args.warmup_ratio), total_steps
    )
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)

    out: Path = args.out
    state: dict[str, Any] = {"step": 0, "epoch": 0, "batch": 0, "losses": [], "tokens": 0}
    state["seconds"] = 0.0
    resuming = args.resume and (out / CHECKPOINT / "state.pt").is_file()
    # A resumed run has the base's held-out figures in its checkpoint already.
    skip = args.skip_before or resuming
    before = {} if skip else evaluate(model, eval_data, pad_id, args.eval_batch_size, device)
    if resuming:
        saved = torch.load(out / CHECKPOINT / "state.pt", weights_only=False)
        accelerator.unwrap_model(model).load_state_dict(saved["weights"], strict=False)
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        state, before = saved["state"], saved["before"]
        random.setstate(saved["rng"]["python"])
        torch.set_rng_state(saved["rng"]["torch"])
        print(f"resuming at step {state['step']} (epoch {state['epoch'] + 1})", flush=True)
    elif args.resume:
        print(f"no checkpoint in {out / CHECKPOINT}; starting from the beginning", flush=True)

    def save_checkpoint() -> None:
        if not accelerator.is_main_process:
            return
        folder = out / CHECKPOINT
        folder.mkdir(parents=True, exist_ok=True)
        payload = {
            "weights": trainable_state(accelerator.unwrap_model(model)),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "state": state,
            "before": before,
            "rng": {"python": random.getstate(), "torch": torch.get_rng_state()},
        }
        torch.save(payload, folder / "state.pt.tmp")
        (folder / "state.pt.tmp").replace(folder / "state.pt")  # never a torn checkpoint

    model.train()
    bar = tqdm(total=total_steps, initial=state["step"], desc="sft", unit="step")
    done = state["step"] >= total_steps
    while not done and state["epoch"] < args.epochs:
        epoch_batches = batches(rows, args.batch_size, state["epoch"], args.seed)
        epoch_batches = epoch_batches[accelerator.process_index :: shards]
        for index in range(state["batch"], len(epoch_batches)):
            started = time.perf_counter()
            batch = {n: t.to(device) for n, t in collate(epoch_batches[index], pad_id).items()}
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            state["tokens"] += int(batch["attention_mask"].sum())
            state["seconds"] += time.perf_counter() - started
            state["batch"] = index + 1
            state.setdefault("micro", []).append(loss.item())
            if accelerator.sync_gradients:
                state["losses"].append(sum(state["micro"]) / len(state["micro"]))
                state["micro"] = []
                state["step"] += 1
                bar.update(1)
                bar.set_postfix(loss=f"{state['losses'][-1]:.4f}")
                if state["step"] >= total_steps:
                    done = True
                    break
                if args.stop_after and state["step"] >= args.stop_after:
                    save_checkpoint()
                    bar.close()
                    return {"interrupted": True, "step": state["step"]}
                if args.save_every and state["step"] % args.save_every == 0:
                    save_checkpoint()
        if not done:
            state["epoch"] += 1
            state["batch"] = 0
            save_checkpoint()
    bar.close()
    save_checkpoint()
    after = evaluate(model, eval_data, pad_id, args.eval_batch_size, device)
    final = accelerator.unwrap_model(model)
    return {
        "model": final,
        "tokenizer": tokenizer,
        "base": base_name,
        "metrics": {
            "heldout": {"before": before, "after": after, "examples": len(eval_data)},
            "train": {
                "examples": len(train_data),
                "rows": len(rows),
                "steps": state["step"],
                "tokens": state["tokens"],
                "seconds": round(state["seconds"], 2),
                "tokens_per_s": round(state["tokens"] / max(state["seconds"], 1e-9), 1),
                **loss_summary(state["losses"]),
            },
        },
    }


def save(result: dict[str, Any], args: argparse.Namespace) -> None:
    out: Path = args.out
    model, metrics = result["model"], result["metrics"]
    lora = args.method == "lora" or args.qlora
    model.save_pretrained(out)
    if not lora:
        result["tokenizer"].save_pretrained(out)
    before, after = metrics["heldout"]["before"], metrics["heldout"]["after"]
    if before and after:
        metrics["heldout"]["perplexity_change"] = round(
            after["perplexity"] / before["perplexity"] - 1, 4
        )
    method = ("qlora" if args.qlora else "sft-lora") if lora else "sft-full"
    data_manifest = args.data / "manifest.json"
    manifest = registry.manifest(
        "generator",
        args.name,
        args.version,
        base=result["base"],
        method=method,
        fmt="peft-lora" if lora else "hf",
        data={
            "path": str(args.data),
            "sha256": files_sha256([args.data / "train.jsonl", args.data / "heldout.jsonl"]),
            "dataset_manifest": str(data_manifest) if data_manifest.is_file() else "",
        },
        metrics=metrics,
        params=run_params(args, "models_dir", "resume"),
        libraries=library_versions(("torch", "transformers", "peft")),
    )
    (out / "metrics.json").write_text(_json(metrics), encoding="utf-8")
    (out / "README.md").write_text(card(manifest), encoding="utf-8")
    shutil.rmtree(out / CHECKPOINT, ignore_errors=True)  # the run finished; the model is saved
    registry.write_manifest(out, manifest)


def _json(data: Any) -> str:
    import json

    return json.dumps(data, indent=2) + "\n"


def card(manifest: dict[str, Any]) -> str:
    m = manifest["metrics"]
    before, after = m["heldout"]["before"], m["heldout"]["after"]
    lines = [
        f"# generator/{manifest['name']}/{manifest['version']}",
        "",
        f"{manifest['method']} of `{manifest['base']}` by `python -m trainers.generator.sft` "
        f"(format `{manifest['format']}`).",
        "",
        "| held-out (assistant tokens) | loss | perplexity |",
        "| --- | --- | --- |",
    ]
    if before:
        lines.append(f"| base | {before['loss']} | {before['perplexity']} |")
    if after:
        lines.append(f"| fine-tuned | {after['loss']} | {after['perplexity']} |")
    t = m["train"]
    lines += [
        "",
        f"Training: {t['examples']} examples, {t['steps']} steps, {t['tokens']} tokens in "
        f"{t['seconds']} s ({t['tokens_per_s']} tokens/s); loss {t.get('loss_first')} → "
        f"{t.get('loss_last')}.",
        "",
        "Serve: `RAGRAIL_GENERATOR_ENGINE=torch "
        f"RAGRAIL_GENERATOR_REGISTRY_MODEL={manifest['name']}/{manifest['version']}`.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.qlora:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit(QLORA_NEEDS_GPU)  # before any model is loaded
    args.out = args.out or registry.version_dir(
        "generator", args.name, args.version, args.models_dir
    )
    if (args.out / "manifest.json").is_file() and not args.overwrite:
        raise SystemExit(f"{args.out} holds a finished model; pass --overwrite or a new --version")
    if args.out.exists() and not args.resume:
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    result = train(args)
    if result.get("interrupted"):
        print(f"stopped after step {result['step']}; --resume goes on from {args.out}")
        return 0
    if int(os.environ.get("RANK", "0")) == 0:  # one writer under torchrun / accelerate launch
        save(result, args)
    print(_json(result["metrics"]), end="")
    print(f"saved to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
