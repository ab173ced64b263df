"""A tiny extractive reader for tests: `python -m trainers.reader` on tests/fixtures/qa_tiny
(16 questions over the sample corpus), 96-token windows, a few steps: seconds on 2 cores. It
extracts spans with exact offsets, which is what tests check; its answers are not good."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QA_TINY = FIXTURES / "qa_tiny"
TINY_READER_ARGS = [
    "--covidqa", str(QA_TINY), "--xquad", "", "--max-length", "96", "--epochs", "2",
    "--batch-size", "8", "--threads", "2", "--eval-window-chars", "300",
    "--eval-negatives", "4", "--log-every", "4", "--seed", "0", "--dev-articles", "1",
    "--other-negatives", "1",
]  # fmt: skip


def train_tiny_reader(out: Path, *extra: str) -> Path:
    from trainers.reader.train import main

    assert main(["--out", str(out), "--overwrite", *TINY_READER_ARGS, *extra]) == 0
    return out
