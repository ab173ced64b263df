"""A configuration's rows scored: SQuAD F1 / EM / containment, sources, citations,
abstention, tokens and latency."""

from __future__ import annotations

import statistics

from bench.common import percentiles
from shared.text import best, contained, exact, token_f1, without_citations


def answer_text(content: str) -> str:
    """The answer without its [n] markers (they are not words of the answer)."""
    return without_citations(content).strip()


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
