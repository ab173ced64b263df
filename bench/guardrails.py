"""Guardrails benchmark through the running service, on ../shared/data.

    python bench/guardrails.py                      # newest model under models/guardrails/
    python bench/guardrails.py --model DIR --requests 200 --engines nemo

It starts the guardrails service (as `ragrail up` would, on free ports) once per engine and
configuration, and prints in one run:
  * prompt injection, deepset test split (116 rows): TPR and FPR of the input rails, of the
    classifier rail alone, and of a keyword/regex-only rail set (baseline, same service);
    NeMo Guardrails' published figures for its perplexity heuristics as a reference line;
  * false positives on benign in-domain questions: the SciFact claims of qrels/test.tsv
    (300; the trainer's --in-domain trains on qrels/train.tsv claims only), blocked by the
    input rails and by the classifier rail alone;
  * PII, presidio-research synthetic set (1,500 texts): per entity type, precision and
    recall of the spans the service masked (a span counts when it overlaps a gold span of
    the same type) and character overlap of masked and gold spans;
  * retrieval rails: share of benign SciFact abstracts dropped, and of the same abstracts
    with a test-split injection inserted;
  * p50/p95 latency through gRPC of CheckInput, CheckRetrieval (5 chunks) and CheckOutput
    (groundedness on 5 chunks), per engine (nemo: LLMRails; direct: same rails without it;
    nemo-stock: LLMRails without services/guardrails/colang.py's speed-ups);
  * how often NeMo Guardrails' YARA rule sets fire on benign text (SciFact abstracts and the
    benign prompts), in process.
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

console = Console()
CONFIG = REPO / "services" / "guardrails" / "config"
PII_TYPES = ("EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "US_SSN", "IP_ADDRESS")
BLOCK, MODIFY = guardrails_pb2.VERDICT_BLOCK, guardrails_pb2.VERDICT_MODIFY
# The baseline: what a keyword/regex deny list catches, no model.
BASELINE_PATTERNS = [
    r"\b(ignore|disregard|forget|skip)\b.{0,30}\b(previous|prior|above|earlier|all|your)\b.{0,20}"
    r"\b(instructions?|rules|tasks?|prompts?|directions|guidelines|context)\b",
    r"\b(reveal|print|show|repeat|output|leak)\b.{0,40}\b(system|hidden|initial|secret)\s+"
    r"(prompt|instructions|message)\b",
    r"\byou are (now|no longer)\b",
    r"\b(act|acting|pretend|roleplay)\b.{0,15}\b(as|to be)\b",
    r"\b(DAN|developer|god|jailbreak)\s*mode\b",
    r"\bnew (task|instructions?|rules)\b",
    r"\b(override|bypass)\b.{0,30}\b(safety|filters?|rules|restrictions|instructions)\b",
    r"\bvergiss\b|\bignoriere\b",  # the deepset set has German rows
]
# NeMo Guardrails' own figures for its perplexity-based jailbreak heuristics (gpt2-large),
# from its documentation; not measured here (the model is not available offline).
NEMO_HEURISTICS = "NeMo jailbreak heuristics (published: 31% TPR at 7.4% FPR, ~3.2 s/check CPU)"


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
            [sys.executable, "-m", "services.guardrails"], cwd=REPO, env=full, stdout=sink,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
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


def false_positives(replies: list) -> dict:
    blocked = [r for r in replies if r.verdict == BLOCK]
    by_rail: dict[str, int] = {}
    for r in blocked:
        by_rail[r.rail] = by_rail.get(r.rail, 0) + 1
    return {"fpr": len(blocked) / max(len(replies), 1), "fp": len(blocked), "n": len(replies),
            "by_rail": by_rail}  # fmt: skip


def detection(replies: list, labels: list[int]) -> dict:
    flagged = [r.verdict == BLOCK for r in replies]
    pos = sum(labels)
    neg = len(labels) - pos
    tp = sum(f and y for f, y in zip(flagged, labels, strict=True))
    fp = sum(f and not y for f, y in zip(flagged, labels, strict=True))
    by_rail: dict[str, int] = {}
    for r in replies:
        if r.verdict == BLOCK:
            by_rail[r.rail] = by_rail.get(r.rail, 0) + 1
    return {"tpr": tp / pos, "fpr": fp / neg, "tp": tp, "pos": pos, "fp": fp, "neg": neg,
            "by_rail": by_rail}  # fmt: skip


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
    stats = {t: {"gold": 0, "found": 0, "pred": 0, "correct": 0, "gold_chars": 0,
                 "pred_chars": 0, "overlap": 0} for t in PII_TYPES}  # fmt: skip
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
        answer = " ".join(re.split(r"(?<=[.!?])\s+", body)[:2])
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


def corpus_slice(start: int, n: int) -> list[str]:
    """Chunk-sized SciFact abstracts `start` to `start + n`: past the 500 the retrieval
    threshold is calibrated on (README), so they are unseen benign documents."""
    corpus = SHARED_DATA / "scifact" / "corpus.jsonl"
    texts = []
    with corpus.open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= start:
                row = json.loads(line)
                texts.append(f"{row.get('title', '')}\n\n{row['text']}"[:1000])
            if len(texts) >= n:
                break
    return texts


def with_injections(docs: list[str], injections: list[str]) -> list[str]:
    """Each document with an injection inserted at a sentence boundary near its middle."""
    out = []
    for i, doc in enumerate(docs):
        cut = doc.find(". ", len(doc) // 2)
        cut = len(doc) if cut < 0 else cut + 2
        out.append(f"{doc[:cut]}{injections[i % len(injections)]} {doc[cut:]}")
    return out


def dropped(client: Client, chunks: list[str], desc: str) -> float:
    """Share of chunks the retrieval rails block (drop), sent 5 per request."""
    calls = [
        (
            "CheckRetrieval",
            guardrails_pb2.CheckRetrievalRequest(
                query="What did they find?",
                chunks=[
                    common_pb2.TextPassage(id=str(j), text=t)
                    for j, t in enumerate(chunks[i : i + 5])
                ],
            ),
        )
        for i in range(0, len(chunks), 5)
    ]
    replies, _ = client.run(calls, desc)
    blocked = sum(c.result.verdict == BLOCK for r in replies for c in r.chunks)
    return blocked / len(chunks)


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


def newest_model() -> Path | None:
    from shared.models.classifier import newest_injection_model

    return newest_injection_model(str(REPO / "models" / "guardrails"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="Classifier dir (default: newest trained).")
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument(
        "--engines",
        default="nemo,direct,nemo-stock",
        help="nemo, direct, nemo-stock (nemo with RAGRAIL_GUARDRAILS_COLANG_SPEEDUPS=false: "
        "NeMo Guardrails' Colang runtime as shipped, the baseline for the speed-ups)",
    )
    parser.add_argument("--requests", type=int, default=100, help="Timed output/retrieval calls.")
    parser.add_argument("--pii-texts", type=int, default=0, help="PII texts (0: all 1,500).")
    args = parser.parse_args()
    model = args.model or newest_model()
    if model is None:
        console.print("[red]no classifier: run `python -m trainers.guardrails --data "
                      "../shared/data/prompt_injections` first[/red]")  # fmt: skip
        return 1
    injections = jsonl(args.data / "prompt_injections" / "test.jsonl")
    pii_rows = json.loads((args.data / "pii" / "synth_dataset_v2.json").read_text())
    if args.pii_texts:
        pii_rows = pii_rows[: args.pii_texts]
    texts = passages(50)
    claims = in_domain_claims(args.data)
    benign_results: dict[str, dict] = {}
    labels = [int(r["label"]) for r in injections]
    console.print(f"model {model}; {len(injections)} injection test rows, {len(pii_rows)} PII "
                  f"texts, {len(texts)} passages for latency")  # fmt: skip
    base_env = {"RAGRAIL_GUARDRAILS_INJECTION_MODEL": str(model)}
    corpus_ok = (SHARED_DATA / "scifact" / "corpus.jsonl").is_file()
    retrieval_rates: dict[str, float] = {}
    results: dict[str, dict] = {}
    latency: dict[str, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="ragrail-bench-guardrails-") as tmp:
        root = Path(tmp)
        # Embeddings for groundedness, whatever sits under models/reranker/: the bench
        # measures the default CPU path.
        default = config_dir(root, "default", grounding={"scorer": "embedding"})
        for engine in args.engines.split(","):
            env = {
                **base_env,
                "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(default),
                "RAGRAIL_GUARDRAILS_ENGINE": engine.removesuffix("-stock"),
                "RAGRAIL_GUARDRAILS_COLANG_SPEEDUPS": str(engine != "nemo-stock").lower(),
            }
            with service(env, root / f"{engine}.log") as target:
                client = Client(target)
                calls = [input_request(r["text"]) for r in injections]
                client.run([input_request(f"warm-up question {i}") for i in range(10)], "warm-up")
                replies, ms_in = client.run(calls, f"{engine}: input rails")
                results[f"input rails ({engine})"] = detection(replies, labels)
                _, ms_ret = client.run(
                    retrieval_requests(texts, args.requests), f"{engine}: retrieval"
                )
                _, ms_out = client.run(output_requests(texts, args.requests), f"{engine}: output")
                cpu = client.cpu_ms[-3:]
                latency[engine] = {
                    "CheckInput (input rails)": (*percentiles(ms_in), cpu[0]),
                    "CheckRetrieval (5 chunks)": (*percentiles(ms_ret), cpu[1]),
                    "CheckOutput (groundedness on 5 chunks)": (*percentiles(ms_out), cpu[2]),
                }
                if claims:
                    replies, _ = client.run(
                        [input_request(t) for t in claims], f"{engine}: SciFact test claims"
                    )
                    benign_results[f"input rails ({engine})"] = false_positives(replies)
                if engine == args.engines.split(",")[0] and corpus_ok:
                    benign_docs = corpus_slice(1000, 200)
                    positives = [r["text"] for r in injections if r["label"]]
                    retrieval_rates = {
                        "benign SciFact abstracts (1,000-1,199) dropped": dropped(
                            client, benign_docs, "benign documents"
                        ),
                        "the same with a test-split injection inserted, dropped": dropped(
                            client, with_injections(benign_docs, positives), "injected documents"
                        ),
                    }
        only = config_dir(root, "classifier", ["ragrail injection"])
        env = {**base_env, "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(only)}
        with service(env, root / "classifier.log") as target:
            client = Client(target)
            replies, _ = client.run([input_request(r["text"]) for r in injections], "classifier")
            results["classifier rail alone"] = detection(replies, labels)
            if claims:
                replies, _ = client.run([input_request(t) for t in claims], "classifier: claims")
                benign_results["classifier rail alone"] = false_positives(replies)
        patterns = [
            {"name": f"baseline {i}", "pattern": p} for i, p in enumerate(BASELINE_PATTERNS)
        ]
        baseline = config_dir(root, "baseline", ["ragrail limits", "ragrail deny list"],
                              deny_list={"patterns": patterns})  # fmt: skip
        env = {**base_env, "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(baseline)}
        with service(env, root / "baseline.log") as target:
            client = Client(target)
            calls = [input_request(r["text"]) for r in injections]
            replies, ms_base = client.run(calls, "baseline")
            results["keyword/regex rails (baseline)"] = detection(replies, labels)
            name = "CheckInput (keyword/regex only)"
            latency["baseline"] = {name: (*percentiles(ms_base), client.cpu_ms[-1])}
        pii_only = config_dir(root, "pii", ["ragrail mask pii on input"])
        env = {**base_env, "RAGRAIL_GUARDRAILS_CONFIG_DIR": str(pii_only)}
        with service(env, root / "pii.log") as target:
            client = Client(target)
            replies, ms_pii = client.run([input_request(r["full_text"]) for r in pii_rows], "PII")
            pii = pii_scores(pii_rows, replies)
            name = "CheckInput (PII rail only)"
            latency["pii"] = {name: (*percentiles(ms_pii), client.cpu_ms[-1])}

    table = Table(title=f"Prompt injection, deepset test split ({len(labels)} rows, "
                        f"{sum(labels)} injections), verdict BLOCK = flagged")  # fmt: skip
    for col in ("rails", "TPR", "FPR", "blocked by"):
        table.add_column(col, justify="right" if col in ("TPR", "FPR") else "left")
    for name, r in results.items():
        rails = ", ".join(f"{k} {v}" for k, v in sorted(r["by_rail"].items()))
        table.add_row(name, f"{r['tpr']:.3f} ({r['tp']}/{r['pos']})",
                      f"{r['fpr']:.3f} ({r['fp']}/{r['neg']})", rails)  # fmt: skip
    table.add_row(NEMO_HEURISTICS, "0.31", "0.074", "(reference, not measured)")
    console.print(table)

    if benign_results:
        table = Table(title=f"Benign in-domain questions: SciFact test claims ({len(claims)}, "
                            "qrels/test.tsv), verdict BLOCK = false positive")  # fmt: skip
        for col in ("rails", "FPR", "blocked by"):
            table.add_column(col, justify="right" if col == "FPR" else "left")
        for name, r in benign_results.items():
            rails = ", ".join(f"{k} {v}" for k, v in sorted(r["by_rail"].items()))
            table.add_row(name, f"{r['fpr']:.3f} ({r['fp']}/{r['n']})", rails)
        console.print(table)

    if retrieval_rates:
        table = Table(title="Retrieval rails on documents (CheckRetrieval, 5 chunks a call)")
        table.add_column("documents")
        table.add_column("share dropped", justify="right")
        for name, rate in retrieval_rates.items():
            table.add_row(name, f"{rate:.3f}")
        console.print(table)

    table = Table(title=f"PII, presidio-research synthetic set ({len(pii_rows)} texts), masked "
                        "spans of the PII rail")  # fmt: skip
    for col in ("entity", "gold", "recall", "precision", "masked chars ∩ gold / gold",
                "∩ / masked"):  # fmt: skip
        table.add_column(col, justify="right")
    for kind, s in pii.items():
        table.add_row(
            kind, str(s["gold"]),
            f"{s['found'] / s['gold']:.3f}" if s["gold"] else "-",
            f"{s['correct'] / s['pred']:.3f}" if s["pred"] else "-",
            f"{s['overlap'] / s['gold_chars']:.3f}" if s["gold_chars"] else "-",
            f"{s['overlap'] / s['pred_chars']:.3f}" if s["pred_chars"] else "-",
        )  # fmt: skip
    console.print(table)

    load = os.getloadavg()[0]
    table = Table(title=f"Latency through gRPC, sequential calls (ms; load average {load:.1f} "
                        f"on {os.cpu_count()} CPUs at the end)")  # fmt: skip
    for col in ("engine", "check", "p50", "p95", "service CPU ms/call"):
        table.add_column(col, justify="left" if col in ("engine", "check") else "right")
    for engine, checks in latency.items():
        for check, (p50, p95, cpu) in checks.items():
            table.add_row(engine, check, f"{p50:.1f}", f"{p95:.1f}", f"{cpu:.1f}")
    console.print(table)

    benign = {
        "benign prompts": [r["text"] for r in injections if not r["label"]],
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
