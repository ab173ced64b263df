"""Retrain benchmark: does a full retrain of a published recipe reproduce the published model?

    python bench/retrain.py guardrails          # the guard model's recipe, ~17 min on 2 cores
    python bench/retrain.py reader              # the extractive reader's
    python bench/retrain.py reader --retrained DIR   # compare an existing retrain, train nothing
    python bench/retrain.py reader --with "--bf16"   # the recorded command and more

For the published model of a role (published/manifest.json, trainers/publish.py), in one run:
its recorded trainer command is run again, writing to a scratch directory (wall and CPU time
measured around the trainer process, so the figures are what a user who retrains waits), then
the figures the trainer measured on data it never trained on (guard model: the test splits of
../shared/data per source, `--evaluate`; reader: COVID-QA test and held-out XQuAD through the
INT8 runtime) are printed beside the published model's, with their difference. "within" is
whether every difference is at most --tolerance (0.01 by default).

Run it on a quiet machine: the time is the figure, and PyTorch's threads slow down several
times beside other work.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table

from bench.common import REPO
from trainers.publish import PUBLISHED_ROOT, read_record

console = Console(width=max(Console().width, 120))

# (label, keys into metrics.json) per role: the figures the issue holds a retrain to.
GUARD_FIGURES = [
    ("deepset TPR", ("test", "prompt_injections", "all", "tpr", "rate")),
    ("deepset FPR", ("test", "prompt_injections", "all", "fpr", "rate")),
    ("injections_extra TPR", ("test", "injections_extra", "all", "tpr", "rate")),
    ("injections_extra FPR", ("test", "injections_extra", "all", "fpr", "rate")),
    ("benign instructions refused", ("test", "benign_instructions", "all", "either", "rate")),
    ("content safety unsafe recall", ("test", "content_safety", "all", "recall", "rate")),
    ("content safety safe refused", ("test", "content_safety", "all", "safe_refused", "rate")),
    ("category named when caught",
     ("test", "content_safety", "all", "category_right_when_caught", "rate")),
    ("planted instructions caught", ("test", "documents", "all_planted", "rate")),
]  # fmt: skip
READER_SETS = ("covidqa_test", "xquad_heldout")
READER_KEYS = ("f1", "em", "sentence_f1", "own_article_declined")


def dig(node: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def figures(role: str, metrics: dict[str, Any]) -> dict[str, float | None]:
    """The compared figures of one metrics.json."""
    if role == "guardrails":
        out = {label: dig(metrics, keys) for label, keys in GUARD_FIGURES}
        documents = dig(metrics, ("test", "documents")) or {}
        for domain, d in sorted(documents.items()):
            if isinstance(d, dict) and "dropped" in d:
                out[f"benign passages dropped, {domain}"] = d["dropped"]["rate"]
        return out
    out = {}
    for name in READER_SETS:
        for key in READER_KEYS:
            value = dig(metrics, ("onnx_int8", name, key))
            if value is not None:
                out[f"{name} {key}"] = value
    return out


def guard_test_figures(model_dir: Path, metrics: dict[str, Any]) -> dict[str, Any]:
    """metrics.json of a guard model with its test figures: the trainer's (`--evaluate`), else
    measured here the same way (trainers/guardrails/guard_eval.py on ../shared/data)."""
    if "test" in metrics:
        return metrics
    from bench.common import SHARED_DATA
    from shared.models.guard import GuardModel
    from trainers.guardrails.guard_eval import evaluate

    if not SHARED_DATA.is_dir():
        raise SystemExit(f"{model_dir} has no test figures and {SHARED_DATA} is not here")
    with console.status(f"measuring {model_dir} on the test splits of {SHARED_DATA}"):
        return {**metrics, "test": evaluate(GuardModel(model_dir), SHARED_DATA, 0)}


def with_out(command: str, out: Path, extra: str = "") -> list[str]:
    """The recorded command, writing to `out` (replacing its --out), by this interpreter, with
    `extra` options after its own (the trainers' parsers take the last of a repeated one)."""
    args = shlex.split(command) + shlex.split(extra)
    if args[:2] == ["python", "-m"]:
        args[0] = sys.executable
    if "--out" in args:
        args[args.index("--out") + 1] = str(out)
    else:
        args += ["--out", str(out)]
    return [*args, "--overwrite"] if "--overwrite" not in args else args


def retrain(command: list[str], log: Path) -> tuple[float, float]:
    """Runs the trainer; (wall seconds, CPU seconds of it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with log.open("w") as f, console.status(f"retraining: {shlex.join(command[1:])}"):
        done = subprocess.run(command, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"the trainer failed (exit {done.returncode}); see {log}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=["guardrails", "reader"])
    parser.add_argument("--retrained", type=Path, help="An existing retrain: train nothing.")
    parser.add_argument("--work", type=Path, help="Scratch directory (default: a temporary one).")
    parser.add_argument(
        "--with",
        dest="extra",
        default="",
        metavar="OPTIONS",
        help="Trainer options added to the recorded command, e.g. another recipe's.",
    )
    parser.add_argument("--tolerance", type=float, default=0.01)
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    args = parser.parse_args(argv)

    record = read_record()["models"]
    refs = [ref for ref, entry in record.items() if entry["role"] == args.role]
    if not refs:
        raise SystemExit(f"no published {args.role} model in {PUBLISHED_ROOT}/manifest.json")
    ref = sorted(refs, key=lambda r: record[r]["created_at"])[-1]
    entry = record[ref]
    published = json.loads((PUBLISHED_ROOT / ref / "metrics.json").read_text())
    wall = cpu = None
    if args.retrained:
        out = args.retrained
    else:
        work = args.work or Path(tempfile.mkdtemp(prefix="retrain-"))
        work.mkdir(parents=True, exist_ok=True)
        out = work / "model"
        command = with_out(entry["command"], out, args.extra)
        console.print(f"published {ref}; retraining with {shlex.join(command[1:])}")
        wall, cpu = retrain(command, work / "train.log")
    retrained = json.loads((out / "metrics.json").read_text())
    if args.role == "guardrails":
        published = guard_test_figures(PUBLISHED_ROOT / ref, published)
        retrained = guard_test_figures(out, retrained)

    before, after = figures(args.role, published), figures(args.role, retrained)
    table = Table(title=f"retrain of {ref} against the published model")
    for column in ("figure", "published", "retrained", "difference"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    worst = 0.0
    for label in before:
        a, b = before[label], after.get(label)
        if a is None or b is None:
            table.add_row(label, str(a), str(b), "")
            continue
        worst = max(worst, abs(b - a))
        table.add_row(label, f"{a:.4f}", f"{b:.4f}", f"{b - a:+.4f}")
    console.print(table)
    recorded = published.get("seconds") or dig(published, ("train", "seconds"))
    if wall is not None:
        console.print(
            f"retrain: {wall / 60:.1f} min wall, {cpu / 60:.1f} min CPU "
            f"(published run recorded {recorded} s)"
        )
    within = worst <= args.tolerance
    console.print(
        f"largest difference {worst:.4f}: {'within' if within else 'NOT within'} {args.tolerance}"
    )
    if args.json:
        result = {
            "ref": ref,
            "published": before,
            "retrained": after,
            "wall_s": wall,
            "cpu_s": cpu,
            "largest_difference": worst,
        }
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
