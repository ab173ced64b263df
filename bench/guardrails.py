"""Guardrails benchmark through the running service, on ../shared/data's test splits.

    python bench/guardrails.py                      # newest guard model vs the published one
    python bench/guardrails.py --model DIR --against DIR --json out.json
    python bench/guardrails.py --with-baseline --pii   # also the v3 baseline, PII and YARA

It starts the guardrails service (as `ragrail up` would, on free ports) once per system,
each on the packaged rail configuration of its model:

* **current**: the published guard model (or --against), and **new**: --model (default the
  newest trained under models/guardrails/), measured in the same run on the same rows;
* **baseline** (with --baseline DIR or --with-baseline): the v3 single-head injection
  classifier with the rails it had (injection on input, chunk injection on retrieval);
  trained first when --with-baseline finds none under models/ (`python -m
  trainers.guardrails.baseline --data ../shared/data/prompt_injections --in-domain
  ../shared/data/scifact --benign-docs ../shared/data/scifact/corpus.jsonl`, ~10 min).

and prints for every system, side by side (bench/guardrails_tables.py):
  * every test row of prompt_injections, injections_extra, benign_instructions and
    content_safety through CheckInput with every input rail on, **per source: the benign rows
    refused (over-refusal) next to the attacks caught**, so neither can improve unseen;
  * the done-when figures (safe prompts with alarming words refused, unsafe recall, ...);
  * content safety per hazard category: caught, and whether the refusal named the category;
  * the sounds-dangerous-but-safe requests and greetings, one by one;
  * documents through CheckRetrieval (5 chunks a call): benign test passages dropped and the
    same with a *test* attack planted caught, per domain (documents_mixed test, SciFact
    abstracts 1,000-1,199, and generated e-mail, web, table and code passages with attacks at
    the start, middle or end), per position, kind of attack and disguise;
  * each guard head alone, in process (same files, trainers/guardrails/guard_eval.py);
  * p50/p95 latency through gRPC of CheckInput (every input rail), CheckRetrieval (5
    chunks) and CheckOutput (content safety and groundedness on 5 chunks);
  * with --pii: PII recall/precision (presidio-research set) and the YARA rule sets'
    false-positive rates, as before.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from bench import guardrails_tables as tables
from bench.common import REPO, SHARED_DATA, percentiles
from bench.guardrails_pii import pii_scores, yara_rates
from bench.guardrails_service import (
    Client,
    config_dir,
    input_request,
    output_requests,
    retrieval_requests,
    service,
)
from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2

console = Console()
BLOCK = guardrails_pb2.VERDICT_BLOCK


def jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# -- prompt injection ---------------------------------------------------------------------


def in_domain_claims(data: Path) -> list[str]:
    """SciFact's test claims (qrels/test.tsv ids): benign questions of the served domain that
    no trainer here trains on."""
    from trainers.guardrails.in_domain import InDomain

    root = data / "scifact"
    if not (root / "queries.jsonl").is_file():
        return []
    return InDomain.load(root).test


# -- latency inputs -----------------------------------------------------------------------


def passages(n: int) -> list[str]:
    """Chunk-sized passages (about 1,000 characters): SciFact abstracts when present."""
    corpus = SHARED_DATA / "scifact" / "corpus.jsonl"
    if corpus.is_file():
        texts = []
        with corpus.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                text = f"{row.get('title', '')}\n\n{row['text']}"[:1000]
                if len(text) > 600:
                    texts.append(text)
                if len(texts) >= n:
                    break
        return texts
    samples = REPO / "samples" / "corpus"
    words = " ".join(p.read_text(encoding="utf-8") for p in sorted(samples.iterdir())).split()
    return [" ".join(words[i : i + 160]) for i in range(0, 160 * n, 160)][:n]


# -- main -----------------------------------------------------------------------------------

BASELINE_COMMAND = [
    "-m",
    "trainers.guardrails.baseline",
    "--data",
    "{data}/prompt_injections",
    "--in-domain",
    "{data}/scifact",
    "--benign-docs",
    "{data}/scifact/corpus.jsonl",
    "--out",
    "{out}",
]
BASELINE_FLOWS = {
    "input": [
        "ragrail limits",
        "ragrail deny list",
        "ragrail injection",
        "ragrail topics",
        "ragrail mask pii on input",
    ],
    "retrieval": ["ragrail chunk injection", "ragrail chunk pii"],
    "output": ["injection detection", "ragrail grounding", "ragrail mask pii on output"],
}
PROMPT_SETS = ("prompt_injections", "injections_extra", "benign_instructions", "content_safety")


def newest_guard() -> Path | None:
    """The newest guard model trained under the repository's models/, else the published one
    (what the service loads)."""
    from shared.models import registry
    from shared.models.guard import newest_guard_model

    published = registry.published_root()
    return newest_guard_model(str(REPO / "models" / "guardrails")) or (
        newest_guard_model(str(published / "guardrails")) if published else None
    )


def baseline_model(arg: Path | None, data: Path) -> Path:
    """--baseline, else a v3 classifier under models/guardrails/, else one trained now."""
    if arg:
        return arg
    from shared.models.classifier import newest_injection_model

    found = newest_injection_model(str(REPO / "models" / "guardrails"))
    if found is not None:
        return found
    out = REPO / "models" / "guardrails" / "injection-minilm-finetune" / "v3"
    console.print(
        f"[yellow]no v3 baseline classifier: training it into {out} (the README's "
        "command; about 10 minutes on 2 cores)[/yellow]"
    )
    argv = [a.format(data=data, out=out) for a in BASELINE_COMMAND]
    subprocess.run([sys.executable, *argv], cwd=REPO, check=True)
    return out


def system_config(root: Path, name: str, flows: dict[str, list[str]] | None) -> Path:
    target = config_dir(root, name, grounding={"scorer": "embedding"})
    if flows:
        data = yaml.safe_load((target / "config.yml").read_text(encoding="utf-8"))
        for stage, names in flows.items():
            data["rails"][stage]["flows"] = names
        (target / "config.yml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return target


def prompt_rows(data: Path) -> list[dict]:
    """Every test row of the prompt sets, with its set, plus the probes."""
    from trainers.guardrails.guard_eval import GREETINGS, SOUNDS_DANGEROUS

    rows = []
    for name in PROMPT_SETS:
        path = data / name / "test.jsonl"
        if path.is_file():
            rows += [{**r, "set": name} for r in jsonl(path)]
    rows += [
        {"text": t, "label": 0, "set": "probes", "source": "sounds_dangerous"}
        for t in SOUNDS_DANGEROUS
    ]
    rows += [{"text": t, "label": 0, "set": "probes", "source": "greetings"} for t in GREETINGS]
    rows += [
        {"text": t, "label": 0, "set": "in_domain", "source": "scifact_test_claims"}
        for t in in_domain_claims(data)
    ]
    return rows


def retrieval_calls(passages: list[str]) -> list[tuple[str, object]]:
    return [
        (
            "CheckRetrieval",
            guardrails_pb2.CheckRetrievalRequest(
                query="What does the document say?",
                chunks=[
                    common_pb2.TextPassage(id=str(j), text=t)
                    for j, t in enumerate(passages[i : i + 5])
                ],
            ),
        )
        for i in range(0, len(passages), 5)
    ]


def run_system(
    env: dict[str, str],
    log: Path,
    rows: list[dict],
    docs: list[Any],
    texts: list[str],
    requests: int,
) -> dict:
    """Every prompt through CheckInput, every passage through CheckRetrieval, and timed
    output and retrieval checks."""
    with service(env, log) as target:
        client = Client(target)
        client.run([input_request(f"warm-up question {i}") for i in range(10)], "warm-up")
        replies, ms_in = client.run([input_request(r["text"]) for r in rows], "input rails")
        chunk_replies, _ = client.run(retrieval_calls([d.text for d in docs]), "documents")
        _, ms_ret = client.run(retrieval_requests(texts, requests), "retrieval latency")
        _, ms_out = client.run(output_requests(texts, requests), "output latency")
        benign = [m for m, r in zip(ms_in, rows, strict=True) if r["set"] == "benign_instructions"]
        return {
            "input": [(r.verdict == BLOCK, r.rail, r.reason) for r in replies],
            "chunks": [c.result.verdict == BLOCK for r in chunk_replies for c in r.chunks],
            "latency": {
                "CheckInput (every input rail; benign requests)": percentiles(benign or ms_in),
                "CheckRetrieval (5 chunks)": percentiles(ms_ret),
                "CheckOutput (5 chunks)": percentiles(ms_out),
            },
            "cpu_ms": client.cpu_ms,
        }


def run_in_process(model: Path, rows: list[dict], docs: list[Any], threads: int = 0) -> dict:
    """The verdicts of the rails on the guard model, from its heads in process, in batches
    (no service, no latency): a prompt is refused when the injection or the unsafe head is
    at its threshold, a passage dropped when one of its windows is at the document head's.
    The rails without a model (limits, deny list, topics) are left out."""
    from shared.models.guard import GuardModel

    guard = GuardModel(model, threads=threads)
    inj, uns = guard.head("injection"), guard.head("unsafe")
    logits = guard.score([r["text"] for r in tqdm(rows, desc="prompts", leave=False)]).logits
    verdicts = []
    for x in logits:
        # In the packaged config's order (services/guardrails/config/config.yml): content
        # safety runs before injection, so a harmful request is refused naming its category.
        if x[uns.logit] >= uns.threshold:
            verdicts.append((True, "ragrail content safety", f"category {guard.category(x)}"))
        elif x[inj.logit] >= inj.threshold:
            verdicts.append((True, "ragrail injection", "prompt injection"))
        else:
            verdicts.append((False, "", ""))
    scores = guard.document_scores([d.text for d in docs])
    chunks = [bool(s >= guard.head("document").threshold) for s in scores]
    return {"input": verdicts, "chunks": chunks, "latency": {}, "cpu_ms": []}


def run_latency(env: dict[str, str], log: Path, texts: list[str], requests: int) -> dict:
    """Only the timed calls: benign requests through CheckInput, then the retrieval and
    output checks on 5 chunks."""
    from trainers.guardrails.guard_eval import GREETINGS

    with service(env, log) as target:
        client = Client(target)
        client.run([input_request(f"warm-up question {i}") for i in range(10)], "warm-up")
        questions = [f"{GREETINGS[i % len(GREETINGS)]} ({i})" for i in range(requests)]
        questions = [t.split("\n\n")[0][:120] + "?" for t in texts] + questions
        _, ms_in = client.run([input_request(q) for q in questions[:requests]], "input latency")
        _, ms_ret = client.run(retrieval_requests(texts, requests), "retrieval latency")
        _, ms_out = client.run(output_requests(texts, requests), "output latency")
        return {
            "input": [],
            "chunks": [],
            "latency": {
                "CheckInput (every input rail; benign requests)": percentiles(ms_in),
                "CheckRetrieval (5 chunks)": percentiles(ms_ret),
                "CheckOutput (5 chunks)": percentiles(ms_out),
            },
            "cpu_ms": client.cpu_ms,
        }


def published_guard() -> Path | None:
    """The published guard model (what a fresh clone's service loads)."""
    from shared.models import registry
    from shared.models.guard import newest_guard_model

    published = registry.published_root()
    return newest_guard_model(str(published / "guardrails")) if published else None


def systems_of(args: argparse.Namespace) -> dict[str, tuple[dict[str, str], dict | None, Path]]:
    """name -> (service environment, rail flows or None for the packaged ones, model dir)."""
    out: dict[str, tuple[dict[str, str], dict | None, Path]] = {}
    current = args.against or published_guard()
    model = args.model or newest_guard()
    if current is not None and current.resolve() != (model or current).resolve():
        out["current"] = ({"RAGRAIL_GUARDRAILS_GUARD_MODEL": str(current)}, None, current)
    if model is not None:
        out["new" if out else "guard"] = (
            {"RAGRAIL_GUARDRAILS_GUARD_MODEL": str(model)},
            None,
            model,
        )
    if args.baseline or args.with_baseline:
        baseline = baseline_model(args.baseline, args.data)
        out["baseline"] = (
            {"RAGRAIL_GUARDRAILS_INJECTION_MODEL": str(baseline)},
            BASELINE_FLOWS,
            baseline,
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="Guard model dir (default: newest).")
    parser.add_argument(
        "--against",
        type=Path,
        help="Guard model measured beside --model in the same run (default: the published one).",
    )
    parser.add_argument("--baseline", type=Path, help="v3 classifier dir (adds the baseline).")
    parser.add_argument(
        "--with-baseline",
        action="store_true",
        help="Add the v3 baseline (the newest under models/, else trained now, ~10 min).",
    )
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--engine", default="nemo", choices=("nemo", "direct"))
    parser.add_argument("--requests", type=int, default=100, help="Timed output/retrieval calls.")
    parser.add_argument("--pii", action="store_true", help="Also PII and YARA rates (slower).")
    parser.add_argument("--json", type=Path, help="Also write every figure here.")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="Threads of the in-process guard model (0: every core; 1 on a shared, busy "
        "machine, where two threads wait on each other: several times faster there).",
    )
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "--in-process",
        action="store_true",
        help="Quality only, from the guard heads in process (batched; minutes, not tens of "
        "minutes on a busy machine): no service, no latency, no baseline.",
    )
    how.add_argument(
        "--latency-only",
        action="store_true",
        help="Only the timed calls through the service (--requests of each check).",
    )
    parser.add_argument(
        "--heads",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Also measure each guard head alone, in process (guard_eval; a few minutes).",
    )
    args = parser.parse_args()
    systems = systems_of(args)
    if not any(model for _, flows, model in systems.values() if flows is None):
        console.print("[red]no guard model: run `python -m trainers.guardrails --all` first[/red]")
        return 1
    from trainers.guardrails.guard_eval import planted_test_passages

    rows = prompt_rows(args.data)
    docs = planted_test_passages(args.data, seed=13)
    texts = passages(50)
    for name, (_, _, model) in systems.items():
        console.print(f"{name}: {model}")
    console.print(f"{len(rows)} prompts, {len(docs)} passages")
    if args.in_process:
        console.print(
            "[yellow]--in-process: the tables below are the guard heads' verdicts (as "
            "the rails on the model give them), not the service's[/yellow]"
        )
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="ragrail-bench-guardrails-") as tmp:
        root = Path(tmp)
        for name, (env, flows, model) in systems.items():
            env = {
                **env,
                "RAGRAIL_GUARDRAILS_ENGINE": args.engine,
                "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(system_config(root, name, flows)),
            }
            log = root / f"{name}.log"
            if args.in_process:
                if flows is None:
                    console.print(f"[bold]{name}[/bold]: the guard heads in process")
                    results[name] = run_in_process(model, rows, docs, args.threads)
                continue
            console.print(f"[bold]{name}[/bold]: through the service")
            if args.latency_only:
                results[name] = run_latency(env, log, texts, args.requests)
            else:
                results[name] = run_system(env, log, rows, docs, texts, args.requests)
        if args.pii:
            model = next(m for _, flows, m in systems.values() if flows is None)
            pii_rows = json.loads((args.data / "pii" / "synth_dataset_v2.json").read_text())
            only = config_dir(root, "pii", ["ragrail mask pii on input"])
            env = {
                "RAGRAIL_GUARDRAILS_GUARD_MODEL": str(model),
                "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(only),
            }
            with service(env, root / "pii.log") as target:
                replies, _ = Client(target).run(
                    [input_request(r["full_text"]) for r in pii_rows], "PII"
                )
                pii = pii_scores(pii_rows, replies)

    figures: dict[str, Any] = {"systems": {n: str(m) for n, (_, _, m) in systems.items()}}
    if args.latency_only:
        table, figures["latency"] = tables.latency(results, os.getloadavg()[0], os.cpu_count())
        console.print(table)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
        return 0
    for key, (table, data) in (
        ("per_source", tables.per_source(rows, results)),
        ("done_when", tables.done_when(rows, results)),
        ("categories", tables.categories(rows, results)),
    ):
        console.print(table)
        figures[key] = data
    console.print(tables.probes(rows, results))
    table, figures["documents"] = tables.documents(docs, results)
    console.print(table)

    # Each head alone, in process, on the same files the services loaded.
    from shared.models.guard import GuardModel
    from trainers.guardrails.guard_eval import evaluate
    from trainers.guardrails.guard_eval import summary as head_summary

    figures["heads"] = {}
    for name, (_, flows, model) in systems.items():
        if flows is not None or not args.heads:
            continue
        console.print(f"[bold]Each guard head alone, {name} (in process, same files)[/bold]")
        figures["heads"][name] = evaluate(GuardModel(model, threads=args.threads), args.data, 13)
        for line in head_summary(figures["heads"][name]):
            console.print("  " + line)

    if not args.in_process:
        table, figures["latency"] = tables.latency(results, os.getloadavg()[0], os.cpu_count())
        console.print(table)
    figures["cpu_ms"] = {name: res["cpu_ms"] for name, res in results.items()}

    if args.pii:
        table = Table(title=f"PII, presidio-research synthetic set ({len(pii_rows)} texts)")
        for col in ("entity", "gold", "recall", "precision"):
            table.add_column(col, justify="right")
        for kind, s in pii.items():
            table.add_row(
                kind,
                str(s["gold"]),
                f"{s['found'] / s['gold']:.3f}" if s["gold"] else "-",
                f"{s['correct'] / s['pred']:.3f}" if s["pred"] else "-",
            )
        console.print(table)
        benign = {
            "benign requests": [r["text"] for r in rows if r["set"] == "benign_instructions"][:500],
            "SciFact passages": texts,
        }
        table = Table(title="NeMo Guardrails YARA rule sets on benign text (share flagged)")
        table.add_column("rule set")
        for source in benign:
            table.add_column(f"{source} ({len(benign[source])})", justify="right")
        for name, rates in yara_rates(benign).items():
            table.add_row(name, *(f"{rates[s]:.3f}" for s in benign))
        console.print(table)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
