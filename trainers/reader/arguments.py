"""The command line of `python -m trainers.reader`."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainers.data import add_bf16_argument, add_early_stopping_arguments
from trainers.reader.examples import SHIPPED
from trainers.reader.splits import DEV_ARTICLES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m trainers.reader",
        description="Fine-tune an extractive reader (MiniLM) and export it to INT8 ONNX.",
    )
    parser.add_argument(
        "--covidqa",
        type=lambda s: Path(s) if s else None,
        default=SHIPPED / "covidqa",
        help="COVID-QA directory (documents.jsonl, questions/train.jsonl, plain or .gz); '' "
        "for none. Default: the copy shipped in trainers/reader/training_data/.",
    )
    parser.add_argument(
        "--covidqa-test",
        default=None,
        help="COVID-QA directory whose questions/test.jsonl is evaluated ('' for none). "
        "Default: --covidqa when it has a test split, else ../shared/data/covidqa if present.",
    )
    parser.add_argument(
        "--xquad",
        type=lambda s: Path(s) if s else None,
        default=SHIPPED / "xquad_en" / "xquad.en.json",
        help="XQuAD (SQuAD v1.1 JSON) file, plain or .gz; '' for none. Default: the shipped copy.",
    )
    parser.add_argument("--xquad-eval", type=int, default=8, help="XQuAD articles held out.")
    parser.add_argument("--out", type=Path, help="Default: models/reader/<name>/<version>/.")
    parser.add_argument("--name", default="minilm-covidqa")
    parser.add_argument("--version", default="", help="Default: UTC timestamp.")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--base", default="", help="Base model dir (default: packaged MiniLM).")
    parser.add_argument(
        "--no-train",
        action="store_true",
        help="--base is a reader saved by this trainer: evaluate, export and register it again.",
    )
    parser.add_argument("--max-length", type=int, default=256, help="Tokens per window.")
    parser.add_argument("--max-question-tokens", type=int, default=48)
    parser.add_argument(
        "--negatives",
        type=int,
        default=1,
        help="Windows of the question's own article without the answer, per COVID-QA question.",
    )
    parser.add_argument(
        "--other-negatives",
        type=int,
        default=0,
        help="Chunks of other articles that BM25 ranks highest for the question, labelled no "
        "answer, per question (what the reader faces when the answer was never ingested); "
        "0 in the default recipe (docs/benchmarks.md: why).",
    )
    parser.add_argument(
        "--dev-articles",
        type=int,
        default=0,
        help=f"COVID-QA train articles kept out of training ({DEV_ARTICLES} for the dev split of "
        "bench/answers.py --split dev, to choose the gateway's thresholds on questions the "
        "reader never saw); 0: train on all (the default recipe, minilm-covidqa/v2).",
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=0, help="Stop early (0: all epochs).")
    parser.add_argument(
        "--stop-after",
        type=int,
        default=0,
        help="End this run after so many steps, the schedule still planned for all of them "
        "(then --resume); 0: train to the end.",
    )
    parser.add_argument(
        "--by-length",
        action="store_true",
        help="Batches of windows of similar length (less padding, faster).",
    )
    add_bf16_argument(parser, "Train", "evaluation and export")
    add_early_stopping_arguments(parser, patience=0, held_rows=300, rows="questions")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="Steps (0: none).")
    parser.add_argument("--resume", action="store_true", help="From <out>/checkpoint.pt.")
    parser.add_argument(
        "--eval-max", type=int, default=0, help="Questions per evaluation set (0: all)."
    )
    parser.add_argument(
        "--skip-torch-eval", action="store_true", help="Evaluate the INT8 export only."
    )
    parser.add_argument("--max-examples", type=int, default=0, help="Subsample (tests).")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--head-lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=float, default=0.1, help="Share of steps.")
    parser.add_argument("--threads", type=int, default=0, help="Torch threads (0: default).")
    parser.add_argument("--eval-window-chars", type=int, default=1000)
    parser.add_argument("--eval-negatives", type=int, default=200)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)
