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
The parts live in bench/qa/, one module a job; this file is the command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console

from bench.common import REPO, SHARED_DATA, running_suite
from bench.qa.asking import ask
from bench.qa.configs import CONFIGS, Config, config_arg, run_config
from bench.qa.data import load_qa, split_questions
from bench.qa.scoring import score
from bench.qa.suite import FULL, HOLDOUT, generator_model, ingest, suite_env
from bench.qa.tables import abstention_grid, table
from ragrail.client import GatewayClient

console = Console()


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
