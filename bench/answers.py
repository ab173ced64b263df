"""Answer quality benchmark: grounded chat through the gateway on a QA set in the COVID-QA
layout (`documents.jsonl`, `questions/test.jsonl`).

    python bench/answers.py --questions 60          # the quick seed-0 subset
    python bench/answers.py                          # every test question (figures)
    python bench/answers.py --configs today,baseline,default --max-tokens 96
    python bench/answers.py --configs today:60,baseline,default   # today's slow pipeline on 60
    python bench/answers.py --gateway http://127.0.0.1:8080   # a running suite, as configured
    python bench/answers.py --config examples/vllm.yaml --configs default,chunks,baseline
    python bench/answers.py --env RAGRAIL_GENERATOR_ENGINE=openai \
        --env RAGRAIL_GENERATOR_REMOTE_URL=http://127.0.0.1:8000/v1   # any remote generator

It starts the suite on free ports (as `ragrail up` would, with the `--config` YAML file as
RAGRAIL_CONFIG and `--env` settings on top: any generator, embedder or reranker, local or
behind a model server, docs/model-servers.md), ingests the
articles through the gateway into two collections, one with every article and one without
the `--holdout` held-out test articles, and asks through `/v1/chat/completions` (streamed,
one at a time, `temperature` 0):
  * the answerable questions (seed-0 sample of `--questions`, or all) against the full
    collection;
  * the questions of the held-out articles against the collection without them: the
    documents cannot hold their answer, so the right reply is an abstention.

Per configuration it prints token F1 and exact match (SQuAD normalisation, best over the gold
answers; an abstention scores 0), the share of answers that contain a gold answer, the share
whose sources include the gold article, the share of given answers that cite, cited
precision (cited sources that are the gold article), abstention on unanswerable and on
answerable questions, prompt tokens, and time to first token and total latency p50/p95 as
the client sees them. Rows in the same run:
  * chat configurations: request body fields (`--configs`, see CONFIGS), e.g. today's
    pipeline (whole chunks to the generator) against the gateway's defaults;
  * `baseline`: no model at all, the retrieved sentence closest to the question by the
    embedder's cosine (the same search the chat makes, then /v1/embeddings);
  * `oracle`: the best single sentence of the same chunks by F1 (a ceiling for a one-sentence
    answer, not a system).
Per-question outputs go to `--out` (JSONL per configuration) for reading the failures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from bench.common import REPO, SHARED_DATA, percentiles, running_suite
from ragrail.client import GatewayClient
from shared.settings import CONFIG_ENV
from shared.text import sentence_spans
from shared.text.qa_metrics import best, contained, exact, token_f1
from trainers.reader.splits import dev_articles

console = Console()
FULL = "bench_answers"
HOLDOUT = "bench_answers_holdout"
CITATION = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
# How an answer without the gateway's own abstention flag says it does not know (today's
# pipeline is told to "say that you do not know").
ABSTAINS = re.compile(
    r"\b(?:do(?:es)? not (?:say|know|contain|mention|provide)|don't know|do not have|"
    r"cannot (?:answer|find)|can't (?:answer|find)|no information|not (?:mentioned|stated))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Config:
    label: str
    body: dict = field(default_factory=dict)
    kind: str = "chat"  # chat, baseline or oracle


CONFIGS: dict[str, Config] = {
    # Before issue 14: every retrieved chunk in the prompt, the generator's text as it comes.
    "today": Config(
        "today's pipeline (whole chunks, generative)",
        {"answer_mode": "generative", "evidence_selection": False, "enable_grounding": False},
    ),
    "default": Config("gateway defaults", {}),
    "extractive": Config("answer_mode extractive", {"answer_mode": "extractive"}),
    "generative": Config(
        "answer_mode generative (selected evidence)", {"answer_mode": "generative"}
    ),
    # Grounded, with whole chunks in the prompt: what a large model behind a server may use.
    "chunks": Config("gateway defaults, whole chunks", {"evidence_selection": False}),
    "auto": Config("answer_mode auto", {"answer_mode": "auto"}),
    # How many retrieved chunks the reader and the evidence selection see (default 4).
    "chunks6": Config("gateway defaults, 6 chunks", {"reranker_top_k": 6}),
    "chunks8": Config("gateway defaults, 8 chunks", {"reranker_top_k": 8}),
    "baseline": Config("no model: closest retrieved sentence (cosine)", kind="baseline"),
    "oracle": Config("ceiling: best retrieved sentence by F1", kind="oracle"),
}


# -- data -------------------------------------------------------------------------------------


def load_qa(root: Path, split: str = "test") -> tuple[dict[str, dict], list[dict]]:
    """The articles and the questions of one split; `dev` is the train questions of the
    articles `python -m trainers.reader --dev-articles 8` leaves out (trainers/reader/
    splits.py): the split to choose thresholds on for a reader trained so (the default recipe
    trains on them)."""
    docs = {}
    with (root / "documents.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            docs[row["id"]] = row
    with (root / "questions" / f"{'train' if split == 'dev' else split}.jsonl").open() as f:
        questions = [json.loads(line) for line in f]
    if split == "dev":
        dev = dev_articles(q["document_id"] for q in questions)
        questions = [q for q in questions if q["document_id"] in dev]
    return docs, questions


def split_questions(
    questions: list[dict], n: int, holdout: int, seed: int
) -> tuple[list[dict], list[dict], set[str]]:
    """(answerable sample, unanswerable sample, held-out article ids). The held-out articles
    are drawn from the test articles; the answerable questions come from every test article
    (they are asked against the full collection), the unanswerable ones from the held-out
    articles only, at most as many as the answerable sample."""
    rng = random.Random(seed)
    articles = sorted({q["document_id"] for q in questions})
    held = set(rng.sample(articles, min(holdout, len(articles))))
    answerable = list(questions)
    if n and n < len(answerable):
        answerable = random.Random(seed).sample(answerable, n)
    unanswerable = [q for q in questions if q["document_id"] in held]
    if n and n < len(unanswerable):
        unanswerable = random.Random(seed + 1).sample(unanswerable, n)
    return answerable, unanswerable, held


# -- scoring ---------------------------------------------------------------------------------


def answer_text(content: str) -> str:
    """The answer without its [n] markers (they are not words of the answer)."""
    return CITATION.sub("", content).strip()


# -- asking -----------------------------------------------------------------------------------


def ask(client: GatewayClient, question: str, collection: str, body: dict, max_tokens: int) -> dict:
    start = time.perf_counter()
    first = None
    parts: list[str] = []
    final: dict = {}
    usage: dict = {}
    for chunk in client.chat_stream(
        [{"role": "user", "content": question}],
        collection=collection,
        max_tokens=max_tokens,
        temperature=0,
        stream_options={"include_usage": True},
        **body,
    ):
        if chunk.get("usage"):
            usage = chunk["usage"]
        choice = chunk["choices"][0] if chunk.get("choices") else {}
        text = choice.get("delta", {}).get("content")
        if text:
            first = first or time.perf_counter()
            parts.append(text)
        if choice.get("finish_reason"):
            final = chunk
    end = time.perf_counter()
    content = "".join(parts)
    answer = final.get("answer") or {}
    abstained = answer["abstained"] if "abstained" in answer else bool(ABSTAINS.search(content))
    return {
        "content": content,
        "abstained": abstained,
        "mode": answer.get("mode", ""),
        "reader_margin": answer.get("reader_margin"),
        "similarity": answer.get("similarity"),
        "citations": [
            {"document_id": c["document_id"], "cited": c["cited"], "index": c["index"]}
            for c in final.get("citations", [])
        ],
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "ttft_ms": ((first or end) - start) * 1000,
        "total_ms": (end - start) * 1000,
        "finish_reason": (final.get("choices") or [{}])[0].get("finish_reason"),
        "warnings": final.get("warnings", []),
    }


def embed(client: GatewayClient, texts: list[str], input_type: str) -> np.ndarray:
    """Unit vectors from the suite's embedder (`/v1/embeddings`), as the gateway compares."""
    reply = client.http.post("/v1/embeddings", json={"input": texts, "input_type": input_type})
    reply.raise_for_status()
    vectors = np.array([d["embedding"] for d in reply.json()["data"]], dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


def keep_index_env(directory: Path | None) -> dict[str, str]:
    """Settings that keep the suite's vector store in `directory` (created), so a later run
    skips the ingest; none without one."""
    if directory is None:
        return {}
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "RAGRAIL_RETRIEVER_MILVUS_URI": str(directory.resolve() / "milvus.db"),
        "RAGRAIL_RETRIEVER_FAISS_DIR": str(directory.resolve() / "faiss"),
    }


class Sentences:
    """The no-model rows: search as the chat does, split the chunks into sentences, and pick
    one by the embedder's cosine (baseline) or by F1 against the gold answer (oracle)."""

    def __init__(self, client: GatewayClient, top_k: int) -> None:
        self.client = client
        self.top_k = top_k

    def ask(self, question: dict, collection: str, oracle: bool) -> dict:
        start = time.perf_counter()
        hits = self.client.search(question["question"], collection, top_k=self.top_k)["hits"]
        candidates = [
            (h["document_id"], h["text"][s.start : s.end])
            for h in hits
            for s in sentence_spans(h["text"])
        ]
        if not candidates:
            pick = ("", "")
        elif oracle:
            pick = max(candidates, key=lambda c: best(token_f1, c[1], question["answers"]))
        else:
            q = embed(self.client, [question["question"]], "query")
            s = embed(self.client, [c[1] for c in candidates], "passage")
            pick = candidates[int(np.argmax(s @ q[0]))]
        total = (time.perf_counter() - start) * 1000
        return {
            "content": pick[1],
            "abstained": False,
            "mode": "oracle" if oracle else "baseline",
            "citations": [
                {"document_id": h["document_id"], "cited": h["document_id"] == pick[0], "index": i}
                for i, h in enumerate(hits, 1)
            ],
            "prompt_tokens": 0,
            "ttft_ms": total,
            "total_ms": total,
            "finish_reason": "stop",
            "warnings": [],
        }


# -- one configuration --------------------------------------------------------------------------


def run_config(
    client: GatewayClient,
    config: Config,
    answerable: list[dict],
    unanswerable: list[dict],
    args: argparse.Namespace,
    out: Path | None,
    keep: list[dict] | None = None,
) -> dict:
    sentences = Sentences(client, args.top_k)

    def one(q: dict, collection: str) -> dict:
        if config.kind == "chat":
            r = ask(client, q["question"], collection, config.body, args.max_tokens)
        else:
            r = sentences.ask(q, collection, oracle=config.kind == "oracle")
        return {"id": q["id"], "question": q["question"], "answers": q["answers"], **r}

    rows, held_rows = [], []
    for q in tqdm(answerable, desc=f"{config.label[:40]}: answerable", unit="q"):
        rows.append(one(q, FULL))
    if config.kind == "chat":  # the no-model rows never abstain
        for q in tqdm(unanswerable, desc=f"{config.label[:40]}: unanswerable", unit="q"):
            held_rows.append(one(q, HOLDOUT))
    tagged = [{**r, "answerable": True} for r in rows] + [
        {**r, "answerable": False} for r in held_rows
    ]
    if keep is not None:
        keep.extend(tagged)
    if out is not None:
        with out.open("w") as f:
            for r in tagged:
                f.write(json.dumps(r) + "\n")
    return score(rows, held_rows, {q["id"]: q["document_id"] for q in answerable})


def score(rows: list[dict], held_rows: list[dict], gold_doc: dict[str, str]) -> dict:
    f1, em, has, among = [], [], [], []
    citing, cited_gold, cited_all = [], 0, 0
    for r in rows:
        text = "" if r["abstained"] else answer_text(r["content"])
        f1.append(best(token_f1, text, r["answers"]))
        em.append(best(exact, text, r["answers"]))
        has.append(best(contained, text, r["answers"]))
        gold = gold_doc[r["id"]]
        among.append(any(c["document_id"] == gold for c in r["citations"]))
        if not r["abstained"]:
            cited = [c for c in r["citations"] if c["cited"]]
            citing.append(bool(cited))
            cited_all += len(cited)
            cited_gold += sum(c["document_id"] == gold for c in cited)
    t50, t95 = percentiles([r["ttft_ms"] for r in rows])
    p50, p95 = percentiles([r["total_ms"] for r in rows])
    return {
        "n": len(rows),
        "n_unanswerable": len(held_rows),
        "f1": statistics.mean(f1),
        "em": statistics.mean(em),
        "contained": statistics.mean(has),
        "gold_among": statistics.mean(among),
        "citing": statistics.mean(citing) if citing else 0.0,
        "cited_precision": cited_gold / cited_all if cited_all else 0.0,
        "abstain_unanswerable": (
            statistics.mean(r["abstained"] for r in held_rows) if held_rows else None
        ),
        "abstain_answerable": statistics.mean(r["abstained"] for r in rows),
        "prompt_tokens": statistics.mean(r["prompt_tokens"] for r in rows),
        "ttft50": t50,
        "ttft95": t95,
        "p50": p50,
        "p95": p95,
    }


def abstention_grid(rows: list[dict], label: str) -> Table:
    """Abstention on unanswerable and answerable questions at other thresholds, from the
    reader margins and similarities the gateway reported: the chat abstains when the
    similarity is below the floor, or the margin below its threshold and the similarity below
    its own."""
    t = Table(title=f"Abstention at other thresholds: {label}")
    for c in (
        "similarity floor",
        "reader margin >=",
        "similarity >=",
        "abstain unanswerable",
        "abstain answerable",
    ):
        t.add_column(c, justify="right")
    have = [r for r in rows if r.get("similarity") is not None]
    if not have:
        return t
    for floor in (-1.0, 0.3, 0.35, 0.4, 0.45, 0.5):
        for margin in (-0.8, -0.6, -0.4, -0.2, 0.0, 0.2, 0.4, 1.01):
            for sim in (0.5, 0.6, 0.7, 1.01):

                def abstains(
                    r: dict, floor: float = floor, margin: float = margin, sim: float = sim
                ) -> bool:
                    m = r.get("reader_margin")
                    s = r["similarity"]
                    return s < floor or ((m is None or m < margin) and s < sim)

                un = [abstains(r) for r in have if not r["answerable"]]
                an = [abstains(r) for r in have if r["answerable"]]
                if un and an:
                    t.add_row(
                        f"{floor:g}",
                        f"{margin:g}",
                        f"{sim:g}",
                        f"{statistics.mean(un):.3f}",
                        f"{statistics.mean(an):.3f}",
                    )
    return t


# -- the run ------------------------------------------------------------------------------------


def ingest(client: GatewayClient, name: str, docs: list[dict], batch: int = 8) -> tuple[float, int]:
    """Ingests the articles unless the collection already holds exactly them (--keep-index)."""
    listed = client.http.get("/v1/documents", params={"collection": name, "limit": 1000})
    if listed.status_code == 200 and {d["id"] for d in listed.json()["documents"]} == {
        d["id"] for d in docs
    }:
        return 0.0, -1
    client.http.delete(f"/v1/collections/{name}")
    client.ensure_collection(name)
    items = [{"name": d["id"], "text": d["text"]} for d in docs]
    chunks = 0
    start = time.perf_counter()
    with tqdm(total=len(items), desc=f"ingest {name}", unit="doc") as bar:
        for i in range(0, len(items), batch):
            result = client.ingest_texts(name, items[i : i + batch])
            chunks += result["total_chunks"]
            bar.update(len(result["documents"]))
    return time.perf_counter() - start, chunks


def table(results: list[tuple[Config, dict]], args: argparse.Namespace) -> Table:
    title = (
        f"Answers ({args.generator}): {args.data.name} {args.split}, "
        f"{results[0][1]['n']} answerable questions, "
        f"{max(r['n_unanswerable'] for _, r in results)} unanswerable "
        f"({args.holdout} held-out articles), max_tokens {args.max_tokens}"
    )
    t = Table(title=title)
    cols = (
        "configuration",
        "F1",
        "EM",
        "gold contained",
        "gold doc in sources",
        "citing",
        "cited precision",
        "abstain unanswerable",
        "abstain answerable",
        "prompt tokens",
        "TTFT p50/p95 ms",
        "total p50/p95 ms",
    )
    for c in cols:
        t.add_column(c, justify="right" if c != "configuration" else "left")
    for config, r in results:
        unans = r["abstain_unanswerable"]
        t.add_row(
            config.label,
            f"{r['f1']:.3f}",
            f"{r['em']:.3f}",
            f"{r['contained']:.3f}",
            f"{r['gold_among']:.3f}",
            f"{r['citing']:.3f}" if config.kind == "chat" else "",
            f"{r['cited_precision']:.3f}",
            f"{unans:.3f}" if unans is not None else "",
            f"{r['abstain_answerable']:.3f}",
            f"{r['prompt_tokens']:.0f}" if config.kind == "chat" else "",
            f"{r['ttft50']:.0f} / {r['ttft95']:.0f}",
            f"{r['p50']:.0f} / {r['p95']:.0f}",
        )
    return t


def generator_model(client: GatewayClient) -> str:
    """The chat model as the gateway names it (/v1/models), so each table says what it
    measured."""
    reply = client.http.get("/v1/models")
    reply.raise_for_status()
    models = reply.json()["data"]
    return next((m["id"] for m in models if m.get("service") == "generator"), "unknown")


def suite_env(args: argparse.Namespace) -> dict[str, str]:
    """The settings of the suite this run starts: --config as RAGRAIL_CONFIG, --env on top,
    each checked before anything starts."""
    env = keep_index_env(args.keep_index)
    if args.config:
        if not args.config.is_file():
            raise SystemExit(f"--config {args.config} is not a file")
        env[CONFIG_ENV] = str(args.config.resolve())
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(
                f"--env {item!r}: expected NAME=VALUE, e.g. RAGRAIL_GENERATOR_ENGINE=openai"
            )
        env[name] = value
    return env


def config_arg(text: str) -> tuple[str, int]:
    """ "name" or "name:N" of --configs."""
    name, _, limit = text.partition(":")
    return name, int(limit or 0)


def run(url: str, args: argparse.Namespace) -> list[tuple[Config, dict]]:
    docs, questions = load_qa(args.data, args.split)
    answerable, unanswerable, held = split_questions(
        questions, args.questions, args.holdout, args.seed
    )
    client = GatewayClient(url, timeout_s=1800)
    args.generator = generator_model(client)
    console.print(f"generator: {args.generator}")
    for name, subset in (
        (FULL, list(docs.values())),
        (HOLDOUT, [d for d in docs.values() if d["id"] not in held]),
    ):
        seconds, chunks = ingest(client, name, subset)
        if chunks >= 0:
            console.print(f"{name}: {len(subset)} articles, {chunks} chunks in {seconds:.0f} s")
        else:
            console.print(f"{name}: {len(subset)} articles already ingested (--keep-index)")
    # Warm-up: first-call costs (model pages, connections) out of the first row's latency.
    ask(client, answerable[0]["question"], FULL, {}, 8)
    results = []
    kept: dict[str, list[dict]] = {}
    for name, limit in args.configs:
        config = CONFIGS[name]
        asked, held_asked = answerable, unanswerable
        if limit:  # a slow configuration on the seed sample of `limit` (a subset of the rest)
            asked, held_asked, _ = split_questions(questions, limit, args.holdout, args.seed)
            config = dataclasses.replace(config, label=f"{config.label} ({limit} q.)")
        out = args.out / f"answers-{name}.jsonl" if args.out else None
        rows: list[dict] = []
        results.append((config, run_config(client, config, asked, held_asked, args, out, rows)))
        kept[name] = rows
        console.print(table(results, args))  # every finished row, in case a later one fails
        if args.abstention_grid and config.kind == "chat":
            console.print(abstention_grid(rows, config.label))
    # Like with like: the configurations asked everything, scored on a sample's questions too.
    gold = {q["id"]: q["document_id"] for q in questions}
    for name, limit in args.configs:
        if not limit:
            continue
        keys = {(r["id"], r["answerable"]) for r in kept[name]}
        for other, other_limit in args.configs:
            if other_limit:
                continue
            same = [r for r in kept[other] if (r["id"], r["answerable"]) in keys]
            config = CONFIGS[other]
            results.append(
                (
                    dataclasses.replace(config, label=f"{config.label} (the same {limit} q.)"),
                    score(
                        [r for r in same if r["answerable"]],
                        [r for r in same if not r["answerable"]],
                        gold,
                    ),
                )
            )
    if any(limit for _, limit in args.configs):
        console.print(table(results, args))
    client.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "covidqa")
    parser.add_argument("--gateway", help="Measure a running suite instead of starting one.")
    parser.add_argument(
        "--questions", type=int, default=0, help="Answerable questions (seed sample); 0: all."
    )
    parser.add_argument("--holdout", type=int, default=4, help="Articles left out.")
    parser.add_argument(
        "--split",
        default="test",
        help="Question file (questions/<split>.jsonl): test for figures; dev (the train "
        "questions of the articles a reader trained with --dev-articles 8 never saw) to "
        "choose its thresholds on.",
    )
    parser.add_argument(
        "--abstention-grid",
        action="store_true",
        help="After each chat configuration, the abstention its recorded reader margins and "
        "similarities would give at other thresholds (the gateway reports both whether it "
        "abstained or not).",
    )
    parser.add_argument(
        "--configs",
        type=lambda s: [config_arg(x) for x in s.split(",") if x],
        default=[("today", 0), ("baseline", 0), ("default", 0)],
        help=f"Comma-separated, from {sorted(CONFIGS)}; name:N asks that one only the seed "
        "sample of N questions (a subset of the others'), which are then also scored on it.",
    )
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--top-k", type=int, default=4, help="Chunks of the no-model rows.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="Setting for the suite this run starts (repeatable), over --config.",
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="A suite YAML file (RAGRAIL_CONFIG, e.g. examples/llama-cpp-server.yaml) for "
        "the suite this run starts: a remote generator, embedder or reranker.",
    )
    parser.add_argument(
        "--keep-index",
        type=Path,
        help="Keep the vector store in this directory and skip ingest when it already holds "
        "the articles (the embedder and chunking must be unchanged).",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    unknown = {name for name, _ in args.configs} - set(CONFIGS)
    if unknown:
        console.print(f"[red]unknown configurations {sorted(unknown)}; known: {sorted(CONFIGS)}")
        return 2
    if not (args.data / "documents.jsonl").exists():
        console.print(f"[red]{args.data} holds no QA set (documents.jsonl); pass --data[/red]")
        return 2
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    if args.gateway and (args.config or args.env):
        console.print(
            "[red]--config and --env configure a suite this run starts; a "
            "--gateway suite runs as it was started[/red]"
        )
        return 2
    if args.gateway:
        run(args.gateway, args)
        return 0
    env = suite_env(args)
    with running_suite(env) as url:
        run(url, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
