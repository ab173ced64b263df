"""The rows of the answer table: chat request bodies and the no-model rows, and one row run
over the questions."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from bench.qa.asking import Sentences, ask
from bench.qa.scoring import score
from bench.qa.suite import FULL, HOLDOUT
from ragrail.client import GatewayClient


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


def config_arg(text: str) -> tuple[str, int]:
    """ "name" or "name:N" of --configs."""
    name, _, limit = text.partition(":")
    return name, int(limit or 0)


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
