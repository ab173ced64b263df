"""Guardrails benchmark through the running service, on ../shared/data's test splits.

    python bench/guardrails.py                 # newest guard model vs the v3 baseline
    python bench/guardrails.py --model DIR --baseline DIR --requests 100 --pii

It starts the guardrails service (as `ragrail up` would, on free ports) twice, each on the
packaged rail configuration of its model:

* **guard**: the guard model (`python -m trainers.guardrails --all`): injection and content
  safety on input, the document-injection rail on retrieval, content safety and grounding
  on output;
* **baseline**: today's v3 recipe, the single-head injection classifier (`python -m
  trainers.guardrails.baseline --data ../shared/data/prompt_injections --in-domain
  ../shared/data/scifact --benign-docs ../shared/data/scifact/corpus.jsonl`) with the rails
  it had (injection on input, chunk injection on retrieval); trained first when
  --baseline names no directory and none is under models/.

and prints, for both and their ratio (guard / baseline):
  * every test row of prompt_injections, injections_extra, benign_instructions and
    content_safety through CheckInput with every input rail on, per source: share blocked
    (TPR for attacks, FPR for benign rows) and which rail blocked;
  * content safety per hazard category: recall, and whether the refusal named the category;
  * the sounds-dangerous-but-safe requests and greetings, one by one;
  * documents: benign test passages per domain (documents_mixed test, SciFact abstracts
    1,000-1,199) and the same with an injections_extra *test* attack planted in a held-out
    disguise variant, through CheckRetrieval (5 chunks a call): dropped / caught per domain;
  * each guard head alone, in process (same files): TPR/FPR of every rail on its own;
  * p50/p95 latency through gRPC of CheckInput (every input rail), CheckRetrieval (5
    chunks) and CheckOutput (content safety and groundedness on 5 chunks);
  * with --pii: PII recall/precision (presidio-research set) and the YARA rule sets'
    false-positive rates, as before.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
import yaml
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from bench.common import REPO, SHARED_DATA, percentiles
from shared.clients import grpc_serving
from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2, guardrails_pb2_grpc
from shared.text import STOP_ONLY

console = Console()
CONFIG = REPO / "services" / "guardrails" / "config"
PII_TYPES = ("EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "US_SSN", "IP_ADDRESS")
BLOCK, MODIFY = guardrails_pb2.VERDICT_BLOCK, guardrails_pb2.VERDICT_MODIFY


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# -- the service --------------------------------------------------------------------------


def config_dir(
    root: Path, name: str, input_flows: list[str] | None = None, **ragrail: dict
) -> Path:
    """A copy of the packaged config with other input flows and `custom_data.ragrail` keys."""
    target = root / name
    shutil.copytree(CONFIG, target)
    data = yaml.safe_load((target / "config.yml").read_text(encoding="utf-8"))
    if input_flows is not None:
        data["rails"]["input"]["flows"] = input_flows
    for key, value in ragrail.items():
        data["custom_data"]["ragrail"][key] = {**data["custom_data"]["ragrail"][key], **value}
    (target / "config.yml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return target


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its threads so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def service(env: dict[str, str], log: Path) -> Iterator[tuple[str, int]]:
    """`python -m services.guardrails` with `env`, until its health check says SERVING."""
    port = free_port()
    full = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
    full.update(
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        RAGRAIL_GUARDRAILS_PORT=str(port),
        RAGRAIL_GUARDRAILS_METRICS_PORT="-1",
        RAGRAIL_GUARDRAILS_LOG_LEVEL="WARNING",
        **env,
    )
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.guardrails"],
            cwd=REPO,
            env=full,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    target = f"127.0.0.1:{port}"

    try:
        deadline = time.monotonic() + 180
        while not asyncio.run(grpc_serving(target)):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"the guardrails service did not start:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.3)
        yield target, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


class Client:
    """Sequential calls over one channel, each timed end to end (gRPC included). With the
    service's pid it also records the service's CPU time per call: wall time on a machine
    shared with other work measures the others too, CPU time much less so."""

    def __init__(self, target: str | tuple[str, int]) -> None:
        self.target, self.pid = target if isinstance(target, tuple) else (target, 0)
        self.cpu_ms: list[float] = []

    def run(self, calls: list[tuple[str, object]], desc: str) -> tuple[list[object], list[float]]:
        before = cpu_seconds(self.pid) if self.pid else 0.0
        replies, ms = self._run(calls, desc)
        if self.pid:
            self.cpu_ms.append((cpu_seconds(self.pid) - before) * 1000 / max(len(calls), 1))
        return replies, ms

    def _run(self, calls: list[tuple[str, object]], desc: str) -> tuple[list[object], list[float]]:
        async def go() -> tuple[list[object], list[float]]:
            replies, ms = [], []
            async with grpc.aio.insecure_channel(self.target) as channel:
                stub = guardrails_pb2_grpc.GuardrailsStub(channel)
                for method, request in tqdm(calls, desc=desc, leave=False):
                    started = time.perf_counter()
                    replies.append(await getattr(stub, method)(request, timeout=60))
                    ms.append((time.perf_counter() - started) * 1000)
            return replies, ms

        return asyncio.run(go())


def input_request(text: str) -> tuple[str, object]:
    message = common_pb2.ChatMessage(role="user", content=text)
    return "CheckInput", guardrails_pb2.CheckInputRequest(messages=[message])


# -- prompt injection ---------------------------------------------------------------------


def in_domain_claims(data: Path) -> list[str]:
    """SciFact's test claims (qrels/test.tsv ids): benign questions of the served domain that
    no trainer here trains on."""
    from trainers.guardrails.in_domain import InDomain

    root = data / "scifact"
    if not (root / "queries.jsonl").is_file():
        return []
    return InDomain.load(root).test


# -- PII ------------------------------------------------------------------------------------

PLACEHOLDER = re.compile(r"<([A-Z_]+)>")


def masked_spans(original: str, masked: str) -> list[tuple[int, int, str]] | None:
    """(start, end, type) in `original` of each <TYPE> placeholder in `masked`, by matching
    `masked` as a pattern (literal pieces, each placeholder any non-empty text) against the
    original; None when it does not match."""
    pieces = PLACEHOLDER.split(masked)  # text, type, text, type, ..., text
    pattern = re.escape(pieces[0]) + "".join(
        f"(.+?){re.escape(pieces[i + 1])}" for i in range(1, len(pieces), 2)
    )
    match = re.fullmatch(pattern, original, re.DOTALL)
    if match is None:
        return None
    kinds = pieces[1::2]
    return [(match.start(g), match.end(g), kinds[g - 1]) for g in range(1, len(kinds) + 1)]


def pii_scores(rows: list[dict], replies: list) -> dict[str, dict]:
    stats = {
        t: {
            "gold": 0,
            "found": 0,
            "pred": 0,
            "correct": 0,
            "gold_chars": 0,
            "pred_chars": 0,
            "overlap": 0,
        }
        for t in PII_TYPES
    }
    unaligned = 0
    for row, reply in zip(rows, replies, strict=True):
        text = row["full_text"]
        gold = [(s["start_position"], s["end_position"], s["entity_type"]) for s in row["spans"]]
        pred = masked_spans(text, reply.modified_text) if reply.verdict == MODIFY else []
        if pred is None:
            unaligned += 1
            pred = []
        for kind in PII_TYPES:
            g = [(a, b) for a, b, t in gold if t == kind]
            p = [(a, b) for a, b, t in pred if t == kind]
            s = stats[kind]
            s["gold"] += len(g)
            s["pred"] += len(p)
            s["found"] += sum(any(a < d and c < b for c, d in p) for a, b in g)
            s["correct"] += sum(any(a < d and c < b for c, d in g) for a, b in p)
            gold_chars = {i for a, b in g for i in range(a, b)}
            pred_chars = {i for a, b in p for i in range(a, b)}
            s["gold_chars"] += len(gold_chars)
            s["pred_chars"] += len(pred_chars)
            s["overlap"] += len(gold_chars & pred_chars)
    if unaligned:
        console.print(
            f"[yellow]{unaligned} masked texts did not align with their original[/yellow]"
        )
    return stats


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


def output_requests(texts: list[str], n: int) -> list[tuple[str, object]]:
    """Answers grounded on the first of 5 chunks (its first two sentences), context 5 chunks."""
    calls = []
    for i in range(n):
        context = [texts[(i + j) % len(texts)] for j in range(5)]
        body = context[0].split("\n\n", 1)[-1]
        answer = " ".join(STOP_ONLY.split(body)[:2])
        calls.append(
            (
                "CheckOutput",
                guardrails_pb2.CheckOutputRequest(
                    messages=[common_pb2.ChatMessage(role="user", content="What did they find?")],
                    answer=answer,
                    context=[
                        common_pb2.TextPassage(id=str(j), text=t) for j, t in enumerate(context)
                    ],
                ),
            )
        )
    return calls


def retrieval_requests(texts: list[str], n: int) -> list[tuple[str, object]]:
    return [
        (
            "CheckRetrieval",
            guardrails_pb2.CheckRetrievalRequest(
                query="What did they find?",
                chunks=[
                    common_pb2.TextPassage(id=str(j), text=texts[(i + j) % len(texts)])
                    for j in range(5)
                ],
            ),
        )
        for i in range(n)
    ]


def yara_rates(benign: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Share of benign texts each NeMo Guardrails YARA rule set flags, in process."""
    import yara
    from nemoguardrails.library.injection_detection import actions

    folder = Path(actions.__file__).parent / "yara_rules"
    out: dict[str, dict[str, float]] = {}
    for name in ("code", "sqli", "template", "xss"):
        rules = yara.compile(filepath=str(folder / f"{name}.yara"))
        out[name] = {
            source: sum(bool(rules.match(data=t)) for t in texts) / len(texts)
            for source, texts in benign.items()
        }
    return out


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
CATEGORY = re.compile(r"category (\w+)")
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
    docs: list[tuple],
    texts: list[str],
    requests: int,
) -> dict:
    """Every prompt through CheckInput, every passage through CheckRetrieval, and timed
    output and retrieval checks."""
    with service(env, log) as target:
        client = Client(target)
        client.run([input_request(f"warm-up question {i}") for i in range(10)], "warm-up")
        replies, ms_in = client.run([input_request(r["text"]) for r in rows], "input rails")
        chunk_replies, _ = client.run(retrieval_calls([d[1] for d in docs]), "documents")
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


def share(flags: list[bool]) -> tuple[float, int, int]:
    return (sum(flags) / len(flags) if flags else float("nan"), sum(flags), len(flags))


def fmt(r: tuple[float, int, int]) -> str:
    return f"{r[0]:.3f} ({r[1]}/{r[2]})"


def ratio(a: tuple[float, int, int], b: tuple[float, int, int]) -> str:
    return f"{a[0] / b[0]:.2f}x" if b[0] else ("-" if not a[0] else "new")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="Guard model dir (default: newest).")
    parser.add_argument("--baseline", type=Path, help="v3 classifier dir (default: newest).")
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--engine", default="nemo", choices=("nemo", "direct"))
    parser.add_argument("--requests", type=int, default=100, help="Timed output/retrieval calls.")
    parser.add_argument("--pii", action="store_true", help="Also PII and YARA rates (slower).")
    args = parser.parse_args()
    model = args.model or newest_guard()
    if model is None:
        console.print("[red]no guard model: run `python -m trainers.guardrails --all` first[/red]")
        return 1
    baseline = baseline_model(args.baseline, args.data)
    from trainers.guardrails.guard_eval import planted_test_passages

    rows = prompt_rows(args.data)
    docs = planted_test_passages(args.data, seed=13)
    texts = passages(50)
    console.print(
        f"guard model {model}; baseline {baseline}; {len(rows)} prompts, {len(docs)} passages"
    )
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="ragrail-bench-guardrails-") as tmp:
        root = Path(tmp)
        systems = {
            "guard": ({"RAGRAIL_GUARDRAILS_GUARD_MODEL": str(model)}, None),
            "baseline": ({"RAGRAIL_GUARDRAILS_INJECTION_MODEL": str(baseline)}, BASELINE_FLOWS),
        }
        for name, (env, flows) in systems.items():
            env = {
                **env,
                "RAGRAIL_GUARDRAILS_ENGINE": args.engine,
                "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(system_config(root, name, flows)),
            }
            results[name] = run_system(env, root / f"{name}.log", rows, docs, texts, args.requests)
        if args.pii:
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
    g, b = results["guard"], results["baseline"]

    # Per source, every input rail together.
    table = Table(
        title=f"Input rails together (CheckInput), per test source: share blocked "
        f"(TPR for attacks, FPR for benign rows); engine {args.engine}"
    )
    for col in ("set", "source", "label", "guard", "baseline", "ratio", "guard: blocked by"):
        table.add_column(col, justify="right" if col in ("guard", "baseline", "ratio") else "left")
    groups: dict[tuple[str, str, int], list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault((r["set"], str(r.get("source", "")), int(r["label"])), []).append(i)
    summary: dict[str, list[int]] = {}
    for (set_name, source, label), idx in sorted(groups.items()):
        gs, bs = share([g["input"][i][0] for i in idx]), share([b["input"][i][0] for i in idx])
        rails: dict[str, int] = {}
        for i in idx:
            if g["input"][i][0]:
                rails[g["input"][i][1]] = rails.get(g["input"][i][1], 0) + 1
        by = ", ".join(f"{k} {v}" for k, v in sorted(rails.items()))
        table.add_row(
            set_name, source, "attack" if label else "benign", fmt(gs), fmt(bs), ratio(gs, bs), by
        )
        summary.setdefault(f"{set_name}|{label}", []).extend(idx)
        if "chitchat" in source:
            summary.setdefault("chitchat|0", []).extend(idx)
    console.print(table)

    table = Table(title="Done-when figures (test splits, every input rail together)")
    for col in ("figure", "target", "guard", "baseline", "ratio"):
        table.add_column(col, justify="left" if col in ("figure", "target") else "right")
    for label, key, target in (
        ("deepset injections blocked (TPR)", "prompt_injections|1", ">= 0.95"),
        ("deepset benign blocked (FPR)", "prompt_injections|0", ""),
        ("injections_extra attacks blocked (TPR)", "injections_extra|1", ">= 0.90"),
        ("injections_extra benign blocked (FPR)", "injections_extra|0", ""),
        ("benign_instructions blocked", "benign_instructions|0", "<= 0.01"),
        ("greetings / chit-chat blocked", "chitchat|0", "0"),
        ("content_safety unsafe blocked (recall)", "content_safety|1", ">= 0.90"),
        ("content_safety safe blocked", "content_safety|0", ""),
        ("SciFact test claims blocked", "in_domain|0", ""),
    ):
        idx = summary.get(key, [])
        gs, bs = share([g["input"][i][0] for i in idx]), share([b["input"][i][0] for i in idx])
        table.add_row(label, target, fmt(gs), fmt(bs), ratio(gs, bs))
    console.print(table)

    # Content safety per category: recall and whether the refusal named the category.
    table = Table(title="Content safety per hazard category (content_safety test, unsafe rows)")
    for col in ("category", "rows", "guard blocked", "named the category", "baseline blocked"):
        table.add_column(col, justify="left" if col == "category" else "right")
    cats: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        if r["set"] == "content_safety" and r["label"]:
            cats.setdefault(r["category"], []).append(i)
    for cat, idx in sorted(cats.items()):
        named = [bool(m := CATEGORY.search(g["input"][i][2])) and m.group(1) == cat for i in idx]
        table.add_row(
            cat,
            str(len(idx)),
            fmt(share([g["input"][i][0] for i in idx])),
            fmt(share(named)),
            fmt(share([b["input"][i][0] for i in idx])),
        )
    console.print(table)

    table = Table(title="Requests that only sound dangerous, and greetings (must pass)")
    for col in ("text", "guard", "baseline"):
        table.add_column(col)
    for i, r in enumerate(rows):
        if r["set"] == "probes":
            verdict = lambda s: f"BLOCKED by {s[1]}" if s[0] else "passed"  # noqa: E731
            table.add_row(r["text"], verdict(g["input"][i]), verdict(b["input"][i]))
    console.print(table)

    table = Table(
        title="Retrieval rails on documents (CheckRetrieval, 5 chunks a call): benign "
        "passages dropped, planted instructions caught, per domain"
    )
    for col in ("domain", "kind", "guard", "baseline", "ratio"):
        table.add_column(col, justify="left" if col in ("domain", "kind") else "right")
    for domain in sorted({d[0] for d in docs}):
        for planted, kind in ((0, "benign dropped"), (1, "planted caught")):
            idx = [i for i, d in enumerate(docs) if d[0] == domain and d[3] == planted]
            if idx:
                gs = share([g["chunks"][i] for i in idx])
                bs = share([b["chunks"][i] for i in idx])
                table.add_row(domain, kind, fmt(gs), fmt(bs), ratio(gs, bs))
    for disguise in sorted({d[2] for d in docs if d[3]}):
        idx = [i for i, d in enumerate(docs) if d[3] and d[2] == disguise]
        gs, bs = share([g["chunks"][i] for i in idx]), share([b["chunks"][i] for i in idx])
        table.add_row("(all)", f"planted, {disguise}", fmt(gs), fmt(bs), ratio(gs, bs))
    console.print(table)

    # Each head alone, in process, on the same files the service loaded.
    from shared.models.guard import GuardModel
    from trainers.guardrails.guard_eval import evaluate
    from trainers.guardrails.guard_eval import summary as head_summary

    console.print("[bold]Each guard head alone (in process, same model files)[/bold]")
    for line in head_summary(evaluate(GuardModel(model), args.data, 13)):
        console.print("  " + line)

    load = os.getloadavg()[0]
    table = Table(
        title=f"Latency through gRPC, sequential calls (ms; load average {load:.1f} "
        f"on {os.cpu_count()} CPUs at the end)"
    )
    for col in ("check", "guard p50", "guard p95", "baseline p50", "baseline p95", "p50 ratio"):
        table.add_column(col, justify="left" if col == "check" else "right")
    for check, (p50, p95) in g["latency"].items():
        b50, b95 = b["latency"][check]
        table.add_row(
            check, f"{p50:.1f}", f"{p95:.1f}", f"{b50:.1f}", f"{b95:.1f}", f"{p50 / b50:.2f}x"
        )
    console.print(table)

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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
