"""The gateway's reader step replayed offline: choose readers and abstention thresholds in
minutes instead of one full `bench/answers.py` run per setting.

    python bench/reader_replay.py dump --split dev --out bench/results/hits-dev.jsonl
    python bench/reader_replay.py replay bench/results/hits-dev.jsonl \
        --readers models/reader/minilm-covidqa/v2,/tmp/reader-v4

`dump` starts the suite (as bench/answers.py does, `--keep-index` to reuse an ingest), asks
`/v1/search` what the chat would retrieve for each question of a split (answerable ones
against every article, the held-out articles' questions against the collection without
them), and stores the chunks with the embedder's cosine of each sentence with the question
(`/v1/embeddings`, the cosines the gateway computes).

`replay` runs each reader over those chunks in process and applies the gateway's own rules
(shared/extractive.py, which services/gateway/chat/stages/ call): the best sentence by
`--similarity-weight` times its cosine, plus `--overlap-weight` times the share of the
question's content words it holds, plus `--margin-weight` times the reader's margin where its
chunk's best span lies in it; the sentences of that chunk's further spans at `--min-ratio` of
its score; and abstention when the closest sentence is under the floor, or the chunk's margin
under its threshold and the cosine under `--close`. It prints, per reader, the figures at the
gateway's default thresholds and the settings of a grid that abstain most on unanswerable
questions while abstaining on at most `--max-answerable` of answerable ones.
On the dev split with reader v3 it matched `bench/answers.py --split dev` within 0.02 on
every column; the bench, through the real services, is still what figures are quoted from.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from bench.common import SHARED_DATA, running_suite
from bench.qa.asking import embed
from bench.qa.data import load_qa, split_questions
from bench.qa.suite import FULL, HOLDOUT, ingest, keep_index_env
from ragrail.client import GatewayClient
from shared.extractive import abstains, answer_choice, further_spans, split_passages
from shared.models.reader import Reader
from shared.text.qa_metrics import best as best_of
from shared.text.qa_metrics import contained, token_f1

console = Console(width=160)


def dump(args: argparse.Namespace) -> None:
    docs, questions = load_qa(args.data, args.split)
    answerable, unanswerable, held = split_questions(questions, 0, args.holdout, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with running_suite(keep_index_env(args.keep_index)) as url, args.out.open("w") as out:
        client = GatewayClient(url, timeout_s=1800)
        for name, subset in (
            (FULL, list(docs.values())),
            (HOLDOUT, [d for d in docs.values() if d["id"] not in held]),
        ):
            ingest(client, name, subset)
        asked = [(q, FULL, True) for q in answerable] + [(q, HOLDOUT, False) for q in unanswerable]
        for q, collection, is_answerable in tqdm(asked, desc="search", unit="q"):
            hits = client.search(q["question"], collection, top_k=args.top_k)["hits"]
            sentences = split_passages([h["text"] for h in hits])
            flat = [s.text for s in sentences]
            cos = (embed(client, flat, "passage") @ embed(client, [q["question"]], "query")[0]
                   if flat else np.zeros(0))  # fmt: skip
            chunks = [
                {
                    "document_id": h["document_id"],
                    "text": h["text"],
                    "sentences": [
                        [s.start, s.end, c]
                        for s, c in zip(sentences, cos.tolist(), strict=True)
                        if s.source == n
                    ],
                }
                for n, h in enumerate(hits, start=1)
            ]
            row = {**q, "answerable": is_answerable, "chunks": chunks}
            out.write(json.dumps(row) + "\n")
        client.close()
    console.print(f"{len(asked)} questions' chunks in {args.out}")


def read(reader: Reader, rows: list[dict], per_passage: int) -> list[dict]:
    """Per question, the reader's spans in each chunk (as the gateway reads them)."""
    return [
        {"row": row, "found": reader.read_all(row["question"], [c["text"] for c in row["chunks"]],
                                              per_passage)}
        for row in tqdm(rows, desc="read", unit="q")
    ]  # fmt: skip


def answer(item: dict, args: argparse.Namespace) -> dict:
    """What the gateway would answer for one question before abstention, by its own rules
    (shared/extractive.py): the answer's sentence (answer_choice), the sentences of the
    reader's further spans that join it (further_spans), and that chunk's reader margin.
    Thresholds change none of it, so the grid reuses it."""
    row = item["row"]
    chunks = row["chunks"][: args.chunks]
    found = item["found"][: args.chunks]
    sentences = split_passages([c["text"] for c in chunks])
    cosines = [c for ch in chunks for _, _, c in ch["sentences"]]
    if len(cosines) != len(sentences):
        raise SystemExit(
            "the dump's sentences are not the gateway's split of its chunks (the splitter "
            "changed since it was written): dump it again with `reader_replay.py dump`"
        )
    out = {"answerable": row["answerable"], "margin": None,
           "similarity": max(cosines, default=-1.0)}  # fmt: skip
    if not sentences:
        return out
    _, best, margin = answer_choice(
        row["question"], found, sentences, cosines,
        similarity_weight=args.similarity_weight, overlap_weight=args.overlap_weight,
        margin_weight=args.margin_weight,
    )  # fmt: skip
    out["margin"] = margin
    if not row["answerable"]:
        return out
    parts = [best, *further_spans(found, best, min_ratio=args.min_ratio,
                                  limit=args.max_sentences - 1)]  # fmt: skip
    text = " ".join(a.sentence for a in sorted(parts, key=lambda a: a.sentence_start))
    return out | {
        "f1": best_of(token_f1, text, row["answers"]),
        "contained": best_of(contained, text, row["answers"]),
        "gold_cited": chunks[best.passage]["document_id"] == row["document_id"],
    }


def replay(answers: list[dict], args: argparse.Namespace, floor: float, margin: float) -> dict:
    f1, has, abst_a, abst_u = [], [], [], []
    cited, cited_gold = 0, 0
    for a in answers:
        says_not = abstains(
            a["similarity"], a["margin"],
            min_similarity=floor, reader_margin=margin, close_similarity=args.close,
        )  # fmt: skip
        if not a["answerable"]:
            abst_u.append(says_not)
            continue
        abst_a.append(says_not)
        if says_not:
            f1.append(0.0)
            has.append(0.0)
            continue
        f1.append(a["f1"])
        has.append(a["contained"])
        cited += 1
        cited_gold += a["gold_cited"]
    return {
        "f1": statistics.mean(f1),
        "contained": statistics.mean(has),
        "cited_precision": cited_gold / cited if cited else 0.0,
        "abstain_unanswerable": statistics.mean(abst_u) if abst_u else 0.0,
        "abstain_answerable": statistics.mean(abst_a),
    }


def replay_all(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in args.hits.open()]
    for path in args.readers:
        reader = Reader.load(Path(path), threads=args.threads)
        answers = [answer(item, args) for item in read(reader, rows, args.max_sentences)]
        table = Table(title=f"{path}: {len(rows)} questions, {args.chunks} chunks")
        for column in ("floor", "margin", "F1", "contained", "cited precision", "abstain unans.",
                       "abstain ans."):  # fmt: skip
            table.add_column(column, justify="right")
        grid = [
            ((f, m), replay(answers, args, f, m))
            for f in (0.3, 0.35, 0.4, 0.45, 0.5)
            for m in (-0.8, -0.6, -0.4, -0.2, 0.0, 0.2, 0.4)
        ]
        allowed = [x for x in grid if x[1]["abstain_answerable"] <= args.max_answerable]
        allowed.sort(key=lambda x: (x[1]["abstain_unanswerable"], x[1]["f1"]), reverse=True)
        default = (args.floor, args.margin)
        shown = [(default, replay(answers, args, *default)), *allowed[: args.show]]
        for (floor, margin), r in shown:
            table.add_row(
                f"{floor:g}",
                f"{margin:g}",
                *(f"{r[key]:.3f}" for key in ("f1", "contained", "cited_precision",
                                              "abstain_unanswerable", "abstain_answerable")),
            )  # fmt: skip
        console.print(table)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="Search each question through a running suite; store it.")
    d.add_argument("--data", type=Path, default=SHARED_DATA / "covidqa")
    d.add_argument("--split", default="dev", help="test, train or dev (see bench/answers.py).")
    d.add_argument("--holdout", type=int, default=4)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--top-k", type=int, default=8, help="Chunks kept per question.")
    d.add_argument("--keep-index", type=Path)
    d.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("replay", help="Replay the gateway's reader step on a dump.")
    r.add_argument("hits", type=Path)
    r.add_argument("--readers", type=lambda s: [x for x in s.split(",") if x], required=True)
    r.add_argument("--chunks", type=int, default=4, help="The chat's reranker_top_k.")
    r.add_argument("--similarity-weight", type=float, default=1.0)
    r.add_argument("--overlap-weight", type=float, default=1.0)
    r.add_argument("--margin-weight", type=float, default=0.25)
    r.add_argument("--max-sentences", type=int, default=2)
    r.add_argument("--min-ratio", type=float, default=0.25)
    r.add_argument("--floor", type=float, default=0.35, help="CHAT_ABSTAIN_MIN_SIMILARITY.")
    r.add_argument("--margin", type=float, default=0.0, help="CHAT_ABSTAIN_READER_MARGIN.")
    r.add_argument("--close", type=float, default=0.6, help="CHAT_ABSTAIN_SIMILARITY.")
    r.add_argument("--max-answerable", type=float, default=0.10)
    r.add_argument("--show", type=int, default=5, help="Grid settings shown.")
    r.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.command == "dump":
        if not (args.data / "documents.jsonl").exists():
            console.print(f"[red]{args.data} holds no QA set (documents.jsonl); pass --data")
            return 2
        dump(args)
    else:
        replay_all(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
