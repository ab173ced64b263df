"""Generator trainers benchmark: does fine-tuning make the served model answer from its sources?

    python -m trainers.generator.data --out data/grounding
    python -m trainers.generator.sft --data data/grounding --name smollm2-grounded --version v1
    python bench/trainers.py --data data/grounding --models smollm2-135m-instruct/base \\
        smollm2-grounded/v1 --limit 40

For each registry model (generator/<name>/<version>; a LoRA version serves as its base plus
the adapter), in one run: the generator service is started with the torch engine on it
(RAGRAIL_GENERATOR_REGISTRY_MODEL), and every held-out grounding prompt (system + user turn)
is answered greedily over gRPC, all at once so the engine batches them. Scores:
  * grounded rows: token-overlap F1 of the answer with the gold evidence sentence, and the
    share of answers that cite [1];
  * unanswerable rows (the source is a distractor): the share that decline;
  * injection rows: the share that refuse (the refusal rate).
Perplexity on the held-out set is the trainer's own (metrics.json of the version), shown
beside. The table goes to stdout and, with --json, to a file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
from rich.console import Console
from rich.table import Table

from bench.generation.service import Service, stream_one
from shared.models import registry
from shared.proto.ragrail.v1 import common_pb2, generator_pb2, generator_pb2_grpc
from trainers.generator import base as base_model
from trainers.generator.data import is_refusal, read_jsonl, token_f1

console = Console(width=max(Console().width, 140))


def pick(rows: list[dict], limit: int) -> list[dict]:
    """Up to `limit` rows, the kinds interleaved so a small limit still holds each kind."""
    by_kind: dict[str, list[dict]] = {}
    for row in rows:
        by_kind.setdefault(row["kind"], []).append(row)
    picked: list[dict] = []
    while len(picked) < limit and any(by_kind.values()):
        for kind in sorted(by_kind):
            if by_kind[kind] and len(picked) < limit:
                picked.append(by_kind[kind].pop(0))
    return picked


async def answer_all(target: str, rows: list[dict], max_tokens: int) -> list[str]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = generator_pb2_grpc.GeneratorStub(channel)

        async def one(row: dict) -> str:
            messages = [
                common_pb2.ChatMessage(role=m["role"], content=m["content"])
                for m in row["messages"][:-1]
            ]
            sampling = generator_pb2.SamplingParams(temperature=0.0, max_tokens=max_tokens)
            reply = await stub.Generate(
                generator_pb2.GenerateRequest(messages=messages, sampling=sampling), timeout=1800
            )
            return str(reply.text)

        return list(await asyncio.gather(*(one(r) for r in rows)))


def score(rows: list[dict], answers: list[str]) -> dict[str, float | int]:
    grounded = [(r, a) for r, a in zip(rows, answers, strict=True) if r["kind"] == "grounded"]
    unanswerable = [a for r, a in zip(rows, answers, strict=True) if r["kind"] == "unanswerable"]
    injection = [a for r, a in zip(rows, answers, strict=True) if r["kind"] == "injection"]

    def share(values: list[bool]) -> float:
        return round(sum(values) / len(values), 3) if values else float("nan")

    return {
        "grounded": len(grounded),
        "evidence_f1": round(
            sum(token_f1(a, r["evidence"]) for r, a in grounded) / max(len(grounded), 1), 3
        ),
        "cites": share(["[1]" in a for _, a in grounded]),
        "unanswerable": len(unanswerable),
        "declines": share([is_refusal(a) for a in unanswerable]),
        "injections": len(injection),
        "refuses": share([is_refusal(a) for a in injection]),
    }


def evaluate(ref: str, rows: list[dict], args: argparse.Namespace, logs: Path) -> dict:
    entry = registry.resolve("generator", *ref.split("/", 1), root=args.models_dir)
    env = {
        "RAGRAIL_GENERATOR_ENGINE": "torch",
        "RAGRAIL_GENERATOR_REGISTRY_MODEL": ref,
        "RAGRAIL_GENERATOR_MODELS_DIR": str(Path(args.models_dir or "models").resolve()),
        "RAGRAIL_GENERATOR_THREADS": str(args.threads),
        "RAGRAIL_GENERATOR_MAX_BATCH_SIZE": str(args.batch),
        "RAGRAIL_GENERATOR_QUEUE_SIZE": str(len(rows)),
        "RAGRAIL_GENERATOR_CONTEXT_LENGTH": "2048",
    }
    service = Service(env, logs / f"{ref.replace('/', '_')}.log")
    try:
        asyncio.run(service.wait())
        started = time.perf_counter()
        answers = asyncio.run(answer_all(service.target, rows, args.max_tokens))
        seconds = time.perf_counter() - started
    finally:
        service.stop()
    metrics = (
        json.loads((entry.path / "metrics.json").read_text())
        if (entry.path / "metrics.json").is_file()
        else {}
    )
    heldout = metrics.get("heldout", {})
    result = {"model": entry.ref, "seconds": round(seconds, 1), **score(rows, answers)}
    result["ppl_before"] = heldout.get("before", {}).get("perplexity")
    result["ppl_after"] = heldout.get("after", {}).get("perplexity")
    result["answers"] = [{"id": r["id"], "answer": a} for r, a in zip(rows, answers, strict=True)]
    return result


def gguf_figures(refs: list[str], rows: list[dict], args: argparse.Namespace) -> list[dict]:
    """File size, held-out perplexity (assistant tokens, the trainer's label mask, through
    llama-cpp-python) and greedy decode tokens/s served by the generator's `llamacpp` engine
    (a service process per file, over gRPC). Speed: the files take turns, `--rounds` times,
    each decoding up to 64 tokens of a counting answer (long and the same for every file);
    the rate is tokens after the first over the time since the first, so prompt processing
    is left out; the median per file is kept."""
    import llama_cpp
    import numpy as np
    from transformers import AutoTokenizer

    from trainers.generator.tokens import IGNORE, encode_chat

    figures, files = [], []
    for ref in refs:
        entry = registry.resolve("generator", *ref.split("/", 1), root=args.models_dir)
        file = entry.path / str(entry.manifest["file"])
        hf = registry.resolve_ref(entry.base, args.models_dir).path
        tokenizer = AutoTokenizer.from_pretrained(str(hf))
        llm = llama_cpp.Llama(str(file), n_ctx=1024, n_threads=args.threads, logits_all=True,
                              verbose=False)  # fmt: skip
        nll, count = 0.0, 0
        for row in rows:
            ids, labels = encode_chat(tokenizer, row["messages"], 1000)
            llm.reset()
            llm.eval(ids)
            logits = np.asarray(llm.scores[: len(ids)], dtype=np.float64)
            for pos in range(len(ids) - 1):
                if labels[pos + 1] != IGNORE:
                    top = logits[pos].max()
                    lse = top + np.log(np.exp(logits[pos] - top).sum())
                    nll += lse - logits[pos][labels[pos + 1]]
                    count += 1
        llm.close()
        figures.append({"model": entry.ref, "bytes": file.stat().st_size,
                        "perplexity": round(float(np.exp(nll / max(count, 1))), 4),
                        "tokens": count})  # fmt: skip
        files.append(file)
    for figure, rate in zip(figures, asyncio.run(engine_rates(files, args)), strict=True):
        figure["tokens_per_s"] = round(rate, 1)
    return figures


async def engine_rates(files: list[Path], args: argparse.Namespace) -> list[float]:
    """Median greedy decode tokens/s of each GGUF file served by the generator's llamacpp
    engine (a service process each, over gRPC: tokens after the first over the time after
    the first, so the stream's hop costs little; bench/generator.py: 0.94-1.0x raw)."""
    import statistics

    services = [
        Service(
            {
                "RAGRAIL_GENERATOR_ENGINE": "llamacpp",
                "RAGRAIL_GENERATOR_MODEL": str(file),
                "RAGRAIL_GENERATOR_THREADS": str(args.threads),
            },
            Path(tempfile.gettempdir()) / f"ragrail-bench-gguf-{n}.log",
        )
        for n, file in enumerate(files)
    ]
    rates: list[list[float]] = [[] for _ in services]
    question = "Count from 1 to 100, separated by commas."
    try:
        for service in services:
            await service.wait()
        for _ in range(args.rounds):  # the files take turns, so a busy spell hits each alike
            for service, rate in zip(services, rates, strict=True):
                async with grpc.aio.insecure_channel(service.target) as channel:
                    stub = generator_pb2_grpc.GeneratorStub(channel)
                    run = await stream_one(stub, question, 64, greedy=True, seed=0)
                if run.tokens > 1:
                    rate.append((run.tokens - 1) / (run.total - run.ttft))
    finally:
        for service in services:
            service.stop()
    return [statistics.median(r) if r else float("nan") for r in rates]


def registry_ref(ref: str) -> str:
    return ref if ref.startswith("generator/") else f"generator/{ref}"


def training_throughput(args: argparse.Namespace, logs: Path) -> list[dict]:
    """Training tokens/s of LoRA and of full fine-tuning: the same `--train-steps` SFT steps
    (same rows, batch 4, 256 tokens) from the first --models entry, each in a fresh process
    with --threads threads; the optimizer steps only, the trainer's own count."""
    import subprocess

    figures = []
    base = registry_ref((args.models or [base_model.REF])[0])
    for method in ("lora", "full"):
        out = logs / f"sft-{method}"
        command = [
            sys.executable, "-m", "trainers.generator.sft", "--data", str(args.data),
            "--base", base, "--out", str(out), "--method", method,
            "--max-steps", str(args.train_steps), "--max-train", str(4 * args.train_steps),
            "--max-eval", "1", "--batch-size", "4", "--max-length", "256", "--skip-before",
            "--save-every", "0", "--threads", str(args.threads),
        ]  # fmt: skip
        if args.models_dir:
            command += ["--models-dir", args.models_dir]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        train = json.loads((out / "metrics.json").read_text())["train"]
        trainable = "adapter" if method == "lora" else "all weights"
        figures.append({"method": method, "trainable": trainable, **train})
    return figures


def throughput_table(figures: list[dict]) -> Table:
    t = Table(title="SFT training throughput (same rows and steps)")
    for column in ("method", "steps", "tokens", "seconds", "tokens/s", "vs LoRA"):
        t.add_column(column)
    for f in figures:
        t.add_row(
            f["method"], str(f["steps"]), str(f["tokens"]), str(f["seconds"]),
            str(f["tokens_per_s"]), f"{f['tokens_per_s'] / figures[0]['tokens_per_s']:.2f}x",
        )  # fmt: skip
    return t


def gguf_table(results: list[dict]) -> Table:
    t = Table(
        title="GGUF: size, greedy decode tokens/s in the llamacpp engine, held-out perplexity"
    )
    for column in ("model", "MB", "tokens/s", "vs first", "perplexity", "vs first"):
        t.add_column(column)
    first = results[0]
    for r in results:
        t.add_row(
            r["model"], f"{r['bytes'] / 1e6:.1f}", str(r["tokens_per_s"]),
            f"{r['tokens_per_s'] / first['tokens_per_s']:.2f}x", str(r["perplexity"]),
            f"{r['perplexity'] / first['perplexity'] - 1:+.1%}",
        )  # fmt: skip
    return t


def table(results: list[dict]) -> Table:
    t = Table(title="held-out grounding, greedy, through the generator's torch engine")
    for column in ("model", "evidence F1", "cites [1]", "declines (no answer in source)",
                   "refuses injections", "held-out ppl (base → this)", "seconds"):  # fmt: skip
        t.add_column(column)
    for r in results:
        ppl = f"{r['ppl_before']} → {r['ppl_after']}" if r["ppl_after"] else "—"
        t.add_row(
            r["model"],
            f"{r['evidence_f1']:.3f} (n={r['grounded']})",
            f"{r['cites']:.2f}",
            f"{r['declines']:.2f} (n={r['unanswerable']})",
            f"{r['refuses']:.2f} (n={r['injections']})",
            ppl,
            str(r["seconds"]),
        )
    return t


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=Path("data/grounding"))
    p.add_argument("--models", nargs="*", default=["smollm2-135m-instruct/base"])
    p.add_argument("--models-dir", default=None)
    p.add_argument("--limit", type=int, default=40, help="held-out rows answered")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--gguf", nargs="*", default=[], help="GGUF versions to compare (F16 first)")
    p.add_argument("--gguf-rows", type=int, default=20, help="held-out rows for GGUF perplexity")
    p.add_argument("--rounds", type=int, default=7, help="GGUF speed rounds (median kept)")
    p.add_argument(
        "--train-steps", type=int, default=0, help="LoRA vs full SFT throughput steps (0: off)"
    )
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    heldout = read_jsonl(args.data / "heldout.jsonl")
    rows = pick(heldout, args.limit)
    with tempfile.TemporaryDirectory() as logs:
        results = [evaluate(ref, rows, args, Path(logs)) for ref in args.models]
        if results:  # printed now: the stages below take minutes more
            console.print(table(results))
        throughput = training_throughput(args, Path(logs)) if args.train_steps else []
    gguf = gguf_figures(args.gguf, heldout[: args.gguf_rows], args) if args.gguf else []
    if gguf:
        console.print(gguf_table(gguf))
        results.append({"gguf": gguf})
    if throughput:
        console.print(throughput_table(throughput))
        results.append({"training_throughput": throughput})
    for r in results:
        if "answers" not in r:
            continue
        console.print(f"[bold]{r['model']}[/bold] samples:")
        for s in r["answers"][:6]:
            console.print(f"  {s['id']}: {s['answer'][:160]!r}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
