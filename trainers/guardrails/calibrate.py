"""A retrieval threshold for a trained classifier, from benign documents.

    python -m trainers.guardrails.calibrate --model models/guardrails/<name>/<version> \\
        --docs ../shared/data/scifact/corpus.jsonl --max-docs 500

The classifier learns from user prompts; retrieved passages are another kind of text, and
measured on SciFact abstracts the prompt threshold flags nearly all of them. The retrieval
rail therefore has its own threshold: the lowest at which at most `--target-fpr` of these
benign documents (each scored as its highest-scoring window, as the rail scores chunks)
would be dropped, and never below the prompt threshold. It is written to head.json
(`retrieval_threshold`) and metrics.json (`retrieval_calibration`).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from trainers.data import read_texts
from trainers.guardrails.scoring import threshold_at_fpr

# As the service's retrieval rail cuts chunks (custom_data.ragrail.injection.window_chars).
WINDOW_CHARS = 500


def document_scores(classifier: Any, docs: list[str], window_chars: int) -> np.ndarray:
    from shared.text import windows

    pieces = [windows(d, window_chars) for d in docs]
    flat = [p for ps in pieces for p in ps]
    scores = classifier.scores(classifier.embed(flat))
    out, start = [], 0
    for ps in pieces:
        out.append(float(scores[start : start + len(ps)].max()))
        start += len(ps)
    return np.asarray(out, dtype=np.float32)


def calibrate(
    classifier: Any, docs: list[str], target_fpr: float, source: str
) -> tuple[float, dict[str, Any]]:
    scores = document_scores(classifier, docs, WINDOW_CHARS)
    benign = np.zeros(len(scores), dtype=np.int8)
    threshold = max(classifier.threshold, threshold_at_fpr(scores, benign, target_fpr))
    stats = {
        "docs": source,
        "documents": len(docs),
        "window_chars": WINDOW_CHARS,
        "target_fpr": target_fpr,
        "prompt_threshold_fpr": round(float((scores >= classifier.threshold).mean()), 4),
        "retrieval_threshold": round(float(threshold), 6),
        "fpr": round(float((scores >= threshold).mean()), 4),
        "score_quantiles": {
            q: round(float(np.quantile(scores, float(q))), 4) for q in ("0.5", "0.9", "0.99")
        },
    }
    return threshold, stats


def write(model: Path, threshold: float, stats: dict[str, Any]) -> None:
    head_file = model / "head.json"
    head = json.loads(head_file.read_text(encoding="utf-8"))
    head["retrieval_threshold"] = round(float(threshold), 6)
    head_file.write_text(json.dumps(head) + "\n", encoding="utf-8")
    metrics_file = model / "metrics.json"
    if metrics_file.is_file():
        metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
        metrics["retrieval_calibration"] = stats
        metrics_file.write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")


def run(model: Path, docs_path: Path, max_docs: int, target_fpr: float) -> dict[str, Any]:
    from shared.models.classifier import InjectionClassifier

    classifier = InjectionClassifier(model)
    docs = read_texts(docs_path, max_docs)
    threshold, stats = calibrate(classifier, docs, target_fpr, str(docs_path))
    write(model, threshold, stats)
    print(
        f"retrieval threshold {threshold:.4f} (prompt threshold {classifier.threshold:.4f} "
        f"would drop {stats['prompt_threshold_fpr']:.1%} of {len(docs)} benign documents; "
        f"this one {stats['fpr']:.1%})",
        flush=True,
    )
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainers.guardrails.calibrate",
        description="Set a trained classifier's retrieval threshold from benign documents.",
    )
    parser.add_argument("--model", type=Path, required=True, help="Classifier directory.")
    parser.add_argument("--docs", type=Path, required=True, help="Benign documents (.jsonl).")
    parser.add_argument("--max-docs", type=int, default=500, help="First N documents (0: all).")
    parser.add_argument(
        "--target-fpr", type=float, default=0.01, help="Share of them the rail may drop."
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run(args.model, args.docs, args.max_docs, args.target_fpr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
