"""A first start's background training (`ragrail up --train`): which trainer, with which
arguments, and the process running it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# The guard model's training by `ragrail up --train` where none is found: `python -m
# trainers.guardrails` with these arguments (RAGRAIL_GUARD_TRAIN_ARGS replaces them, e.g.
# tests' tiny model), then `--out` where the service looks and `--overwrite` (a directory
# there without a manifest is an interrupted training).
TRAIN_ARGS_ENV = "RAGRAIL_GUARD_TRAIN_ARGS"
DEFAULT_TRAIN_ARGS = ("--all", "--seed", "0")
TRAIN_LOG = "train-guardrails.log"
# The default training on 2 quiet AVX2 cores: 552 s (docs/benchmarks.md, "Published models,
# training time and the first start"); a busy machine slows it several times.
TRAIN_MINUTES = "about 9"


# The reader's training by `ragrail up --train`, after the guard model's: `python -m
# trainers.reader` on its shipped data with these arguments (RAGRAIL_READER_TRAIN_ARGS
# replaces them), then `--out` and `--overwrite` as above.
READER_TRAIN_ARGS_ENV = "RAGRAIL_READER_TRAIN_ARGS"
DEFAULT_READER_TRAIN_ARGS = (
    "--epochs", "2", "--max-length", "192", "--eval-max", "100", "--skip-torch-eval",
)  # fmt: skip
READER_TRAIN_LOG = "train-reader.log"
# On 2 quiet AVX2 cores: 940 s of training and a shorter evaluation (docs/benchmarks.md, as
# above).
READER_TRAIN_MINUTES = "about 17"


@dataclass(frozen=True)
class FirstStartTraining:
    """A trainer `ragrail up` runs on a first start: its module, the variable that replaces
    its default arguments, and its log's name; and, for what `ragrail up` says when it starts
    it, what it trains, how long it takes, and how the services answer until it is done."""

    module: str
    args_env: str
    default_args: tuple[str, ...]
    log: str
    what: str
    minutes: str
    meanwhile: str


GUARD_TRAINING = FirstStartTraining(
    "trainers.guardrails",
    TRAIN_ARGS_ENV,
    DEFAULT_TRAIN_ARGS,
    TRAIN_LOG,
    what="the guard model for the guardrails",
    minutes=TRAIN_MINUTES,
    meanwhile="its rails let everything through",
)
READER_TRAINING = FirstStartTraining(
    "trainers.reader",
    READER_TRAIN_ARGS_ENV,
    DEFAULT_READER_TRAIN_ARGS,
    READER_TRAIN_LOG,
    what="the extractive reader for answers",
    minutes=READER_TRAIN_MINUTES,
    meanwhile="answers are the sentence of the sources closest to the question",
)


def training_command(out: Path, recipe: FirstStartTraining = GUARD_TRAINING) -> list[str]:
    """The recipe's trainer with its arguments from the environment (or the defaults), writing
    to `out`, below the services' priority."""
    args = shlex.split(os.environ.get(recipe.args_env, "")) or list(recipe.default_args)
    command = [sys.executable, "-m", recipe.module, *args, "--out", str(out)]
    command.append("--overwrite")
    # Below the services: they keep answering while it trains on the same few cores.
    nice = shutil.which("nice")
    return [nice, "-n", "10", *command] if nice else command


@dataclass
class Training:
    """A model's background training on a first start (the guard model, the reader)."""

    process: subprocess.Popen[bytes]
    log_path: Path
    started: float
    outcome: str = ""  # "", then "done" or "failed"

    @property
    def running(self) -> bool:
        return not self.outcome

    def elapsed(self) -> str:
        seconds = int(time.monotonic() - self.started)
        return f"{seconds // 60}m{seconds % 60:02d}s"
