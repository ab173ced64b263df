"""The short-evidence grounding set: the chat the gateway's evidence selection sends the
generator (services/gateway/chat/stages/evidence.py), with the answer it should give.

    python -m trainers.generator.evidence_data --out data/grounding-evidence
    ragrail train generator-sft --data data/grounding-evidence --name smollm2-evidence ...

Each row is a system message (the gateway's evidence instructions, "Sources:", then
numbered sources of a few sentences each, as `system_text` lays them out), the question as
the user turn, and the answer:
- grounded: COVID-QA `questions/train.jsonl` (never test: split by article, the answers
  benchmark) and SciFact `qrels/train.tsv` claims (never test). The sentence that holds the
  gold answer (COVID-QA) or shares most words with the claim (SciFact) is put in a source
  with the question's most word-sharing other sentences of the same document, beside one or
  two sources of another document's sentences, in random order. The answer is that
  sentence, ending with the [n] of its source: what the gateway's extract says, and what the
  groundedness output rail can match. `--covidqa-answer span` answers COVID-QA rows with the
  gold span instead ("delay [2]."): trained so, SmolLM2's answers were refused by the output
  rails 12 times in 60 (docs/benchmarks.md).
- unanswerable (`--unanswerable` of the questions): the same question with only the other
  documents' sentences; the answer is the gateway's abstention, "The documents do not say."

Split into train and held-out by a hash of the question, written as train.jsonl and
heldout.jsonl (`{"messages", "kind", "evidence", "id"}`, the layout trainers.generator.sft
reads) and manifest.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from shared.text import sentence_around, sentence_spans, with_citation, words
from trainers.generator.data import files_sha256, heldout, report_counts, write_jsonl

# The gateway's default chat_evidence_system_prompt and chat_abstention (a test keeps them
# equal): the model learns the prompt it will be served.
EVIDENCE_SYSTEM = (
    "Answer the question in one or two sentences using only the numbered sources below. "
    "End each sentence with the number of its source, like [1]."
)
ABSTENTION = "The documents do not say."


def system_text(blocks: list[tuple[str, list[str]]]) -> str:
    """The gateway's layout: instructions, "Sources:", then "[n] name\\nsentences" blocks."""
    sources = "\n\n".join(
        f"[{n}] {name}\n{' '.join(sentences)}" for n, (name, sentences) in enumerate(blocks, 1)
    )
    return "\n\n".join([EVIDENCE_SYSTEM, "Sources:", sources])


def cite(answer: str, n: int) -> str:
    """The answer cited as the gateway cites a sentence, always ending in punctuation."""
    answer = answer.strip()
    return with_citation(answer if answer[-1:] in (".", "!", "?") else f"{answer}.", n)


def sentences_of(text: str) -> list[str]:
    return [
        text[s.start : s.end]
        for s in sentence_spans(text)
        if len(words(text[s.start : s.end])) >= 4
    ]


def closest(question: str, sentences: list[str], k: int, skip: set[str]) -> list[str]:
    """The k sentences sharing most words with the question (what evidence selection would
    also offer: related, but not the answer)."""
    q = set(words(question))
    ranked = sorted((s for s in sentences if s not in skip), key=lambda s: -len(q & set(words(s))))
    return ranked[:k]


def row(
    rid: str,
    question: str,
    gold: tuple[str, list[str]] | None,
    others: list[tuple[str, list[str]]],
    answer: str,
    rng: random.Random,
) -> dict[str, Any]:
    blocks = [*others] + ([gold] if gold else [])
    rng.shuffle(blocks)
    if gold is not None:
        n = blocks.index(gold) + 1
        text, kind = cite(answer, n), "grounded"
    else:
        text, kind = ABSTENTION, "unanswerable"
    return {
        "id": rid,
        "kind": kind,
        "evidence": answer if gold else "",
        "messages": [
            {"role": "system", "content": system_text(blocks)},
            {"role": "user", "content": question},
            {"role": "assistant", "content": text},
        ],
    }


def covidqa_rows(root: Path, args: argparse.Namespace, rng: random.Random) -> list[dict]:
    docs = {}
    with (root / "documents.jsonl").open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs[d["id"]] = d
    ids = sorted(docs)
    rows = []
    with (root / "questions" / "train.jsonl").open(encoding="utf-8") as f:
        questions = [json.loads(line) for line in f]
    if args.max_questions:
        questions = questions[: args.max_questions]
    for q in questions:
        doc = docs[q["document_id"]]
        text, answer = doc["text"], q["answers"][0]
        start = q["answer_start"]
        if text[start : start + len(answer)] != answer:
            start = text.find(answer)
            if start < 0:
                continue
        lo, hi = sentence_around(text, start, start + len(answer))
        held = text[lo:hi]
        same = closest(q["question"], sentences_of(text), args.neighbours, {held})
        gold = (doc["title"][:80], [*same[:1], held, *same[1:]])
        other = docs[rng.choice([i for i in ids if i != q["document_id"]])]
        distractor = (
            other["title"][:80],
            closest(q["question"], sentences_of(other["text"]), 2, set()),
        )
        said = held if args.covidqa_answer == "sentence" else answer
        rows.append(row(f"covidqa-{q['id']}", q["question"], gold, [distractor], said, rng))
        if rng.random() < args.unanswerable:
            rows.append(
                row(f"covidqa-{q['id']}-none", q["question"], None, [distractor], said, rng)
            )
    return rows


def scifact_rows(root: Path, args: argparse.Namespace, rng: random.Random) -> list[dict]:
    from trainers.data import Beir

    data = Beir.load(root)
    qrels = data.qrels("train")  # test.tsv is the retrieval benchmark: never trained on
    ids = sorted(data.corpus)
    rows = []
    for qid, relevant in list(qrels.items())[: args.max_questions or None]:
        claim = data.queries[qid]
        doc_id = sorted(relevant)[0]
        abstract = data.corpus[doc_id]
        sentences = sentences_of(abstract)
        if not sentences:
            continue
        q = set(words(claim))
        best = max(sentences, key=lambda s: len(q & set(words(s))))
        same = closest(claim, sentences, args.neighbours, {best})
        gold = (doc_id, [best, *same])
        other = rng.choice([i for i in ids if i not in relevant])
        distractor = (other, closest(claim, sentences_of(data.corpus[other]), 2, set()))
        rows.append(row(f"scifact-{qid}", claim, gold, [distractor], best, rng))
        if rng.random() < args.unanswerable:
            rows.append(row(f"scifact-{qid}-none", claim, None, [distractor], best, rng))
    return rows


def build(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    if args.covidqa:
        rows += covidqa_rows(Path(args.covidqa), args, rng)
    if args.scifact:
        rows += scifact_rows(Path(args.scifact), args, rng)
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "heldout": []}
    for r in rows:
        key = re.sub(r"-none$", "", r["id"])  # a question's rows stay on one side
        splits["heldout" if heldout(key, args.heldout) else "train"].append(r)
    return splits


def write(splits: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        write_jsonl(out / f"{split}.jsonl", rows)
    sources = []
    if args.covidqa:
        sources += [
            Path(args.covidqa) / "documents.jsonl",
            Path(args.covidqa) / "questions" / "train.jsonl",
        ]
    if args.scifact:
        sources += [
            Path(args.scifact) / n for n in ("corpus.jsonl", "queries.jsonl", "qrels/train.tsv")
        ]
    manifest = {
        "format": "short evidence (gateway evidence selection)",
        "sources_sha256": files_sha256(sources),
        "sha256": files_sha256([out / f"{s}.jsonl" for s in splits]),
        "params": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "counts": {
            s: {k: sum(r["kind"] == k for r in rows) for k in ("grounded", "unanswerable")}
            for s, rows in splits.items()
        },
        "system_prompt": EVIDENCE_SYSTEM,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def parser() -> argparse.ArgumentParser:
    here = Path(__file__).resolve().parents[3] / "shared" / "data"
    p = argparse.ArgumentParser(description="Build the short-evidence grounding chat set.")
    p.add_argument("--covidqa", default=str(here / "covidqa"), help="'' for none")
    p.add_argument("--scifact", default=str(here / "scifact"), help="'' for none")
    p.add_argument("--out", type=Path, default=Path("data/grounding-evidence"))
    p.add_argument("--max-questions", type=int, default=0, help="per source; 0: all")
    p.add_argument("--neighbours", type=int, default=2, help="other sentences of the gold doc")
    p.add_argument(
        "--covidqa-answer",
        choices=["sentence", "span"],
        default="sentence",
        help="what a COVID-QA row answers: the sentence that holds the gold answer (what the "
        "extract says, and what the groundedness rail can match) or the gold span itself",
    )
    p.add_argument("--unanswerable", type=float, default=0.15, help="share with no answer")
    p.add_argument("--heldout", type=float, default=0.1, help="held-out fraction")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    write(build(args), args)
    return report_counts(args.out)


if __name__ == "__main__":
    sys.exit(main())
