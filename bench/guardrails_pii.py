"""PII masking scored against the presidio-research set, and the false-positive rates of NeMo
Guardrails' YARA rule sets on benign text: bench/guardrails.py's --pii figures."""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from shared.proto.ragrail.v1 import guardrails_pb2

PII_TYPES = ("EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "US_SSN", "IP_ADDRESS")
MODIFY = guardrails_pb2.VERDICT_MODIFY
console = Console()


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
