"""Chooses a trained guard model's thresholds again, under the current rule
(trainers/guardrails/guard_thresholds.py), without training it again.

    python -m trainers.guardrails.recalibrate --model models/guardrails/guard-minilm/<version>
    python -m trainers.guardrails.recalibrate --model DIR --spare-held 450   # more passages

The held-out part is rebuilt from the arguments its manifest records (same data, budget and
seed: the same split as in training, checked against the manifest's row counts per source),
so the thresholds are chosen on held-out rows only, never on a test split. `--spare-held N`
holds out up to N more passages per domain, of those the training cap left out (the trainer's
option of that name: what was trained on does not change). guard.json,
metrics.json (`calibration`, and `recalibrated`: the command and the thresholds it replaced),
the manifest and the README card are rewritten; the graph is not touched. A model trained with
`--evaluate` is measured on the test splits again at the new thresholds (where they are).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def training_args(manifest: dict[str, Any]) -> argparse.Namespace:
    """The trainer's arguments as the manifest recorded them (defaults for any it lacks)."""
    from trainers.guardrails.guard import parse_args

    args = parse_args([])
    for key, value in manifest["params"].items():
        setattr(args, key, value)
    args.data = Path(manifest["data"]["path"])
    for key in ("in_domain", "benign_docs"):
        value = manifest["data"].get(key) or getattr(args, key, None)
        setattr(args, key, Path(value) if value else None)
    return args


def trained_on(sources: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Rows per source less the spare held-out passages (which a recalibration may add)."""
    return {k: {n: c for n, c in v.items() if n != "spare_held"} for k, v in sources.items()}


def recalibrate(
    model: Path, threads: int, command: str, spare_held: int | None = None
) -> dict[str, Any]:
    from shared.models.guard import GUARD_FILE, GuardModel
    from shared.models.registry import write_manifest
    from trainers.guardrails.guard import HEAD_NAMES, budget_of, write_config
    from trainers.guardrails.guard_card import guard_card
    from trainers.guardrails.guard_data import build
    from trainers.guardrails.guard_thresholds import choose_thresholds

    manifest = json.loads((model / "manifest.json").read_text(encoding="utf-8"))
    args = training_args(manifest)
    if spare_held is not None:
        args.spare_held = spare_held
        manifest["params"]["spare_held"] = spare_held
    in_domain = None
    if args.in_domain:
        from trainers.guardrails.in_domain import InDomain

        in_domain = InDomain.load(args.in_domain).train
    data = build(args.data, budget_of(args), args.seed, in_domain, args.benign_docs)
    if trained_on(data.sources) != trained_on(manifest["data"]["sources"]):
        raise SystemExit(
            f"the data rebuilt from {args.data} differ from what {model} was trained on "
            "(rows per source); recalibrating would choose on other rows"
        )
    previous = {h: manifest["heads"][h]["threshold"] for h in HEAD_NAMES}
    guard = GuardModel(model, threads=threads)
    thresholds, calibration = choose_thresholds(guard, data, args)
    config = write_config(model, thresholds, args, calibration, GUARD_FILE)
    metrics = json.loads((model / "metrics.json").read_text(encoding="utf-8"))
    metrics["calibration"] = calibration
    metrics["recalibrated"] = {
        "command": command,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "previous_thresholds": previous,
    }
    test_data = Path(args.test_data) if args.test_data else None
    if args.evaluate and test_data is not None and test_data.is_dir():
        # Measured again at the new thresholds, as a retrain of the recorded command would.
        from trainers.guardrails.guard_eval import evaluate

        metrics["test"] = evaluate(GuardModel(model, threads=threads), test_data, args.seed)
    else:
        metrics.pop("test", None)  # measured at the old thresholds
    manifest["data"]["sources"] = data.sources
    manifest["heads"] = {h: config["heads"][h] for h in HEAD_NAMES}
    manifest["metrics"] = metrics
    manifest["calibration_command"] = command
    (model / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    (model / "README.md").write_text(guard_card(manifest), encoding="utf-8")
    write_manifest(model, manifest)
    return {
        "previous": previous,
        "thresholds": {h: calibration[h]["threshold"] for h in HEAD_NAMES},
    }


def main(argv: list[str] | None = None) -> int:
    from trainers.data import command_line

    parser = argparse.ArgumentParser(
        prog="python -m trainers.guardrails.recalibrate",
        description="Choose a trained guard model's thresholds again on its held-out part.",
    )
    parser.add_argument("--model", type=Path, required=True, help="Guard model directory.")
    parser.add_argument(
        "--spare-held",
        type=int,
        help="Choose on up to N more held-out passages per domain (the trainer's --spare-held; "
        "default: as trained).",
    )
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not (args.model / "manifest.json").is_file():
        raise SystemExit(f"{args.model} holds no trained guard model (no manifest.json)")
    threads = args.threads or len(os.sched_getaffinity(0))
    command = command_line("trainers.guardrails.recalibrate", argv)
    result = recalibrate(args.model, threads, command, args.spare_held)
    print(json.dumps(result), file=sys.stdout, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
