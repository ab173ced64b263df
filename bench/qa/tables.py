"""The answer benchmark's tables: one row per configuration, and the abstention at other
thresholds."""

from __future__ import annotations

import argparse
import statistics

from rich.table import Table

from bench.qa.configs import Config


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
