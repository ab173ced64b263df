"""Publishes a trained model with the project, so that a fresh clone and every container image
serve it without training: `published/<role>/<name>/<directory>/` in the repository, tracked in
git, holding only what the services load, and `published/manifest.json`, which names each
file's sha256, the model's version and the trainer command, seed and data that produced it.
Services look there for a role that has no model under models/ (shared/models/registry.py).

    python -m trainers.guardrails --all --seed 0 --out models/guardrails/guard-minilm/2026.12.04
    python -m trainers.publish models/guardrails/guard-minilm/2026.12.04   # copy, record
    python -m trainers.publish --check          # every published file is what was recorded

One version of a model ships, and a new one is written **over the old one, in the directory
the model was first published in** (its version is its manifest's, not the directory's name):
git then stores the new files as deltas against the ones they replace, where a new directory
would add the whole model (60-120 MB) to every clone's history again, and a submission would
count it twice (added, and the old one removed). The guard model's embeddings and frozen layers
do not change from one recipe to the next: its republication was an 11 MB `git diff
--binary` (2026-12-04; 19 MB on 2026-12-05, every encoder layer trained), the reader's 49 MB.

The trainers stay the source: a published directory is a trainer's output less the files no
service reads (the FP32 ONNX graph, PyTorch weights, checkpoints). `bench/retrain.py` retrains a
published recipe and compares its figures with the recorded ones.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from shared.models.quantize import sha256 as sha256_file

REPO = Path(__file__).resolve().parents[1]
PUBLISHED_ROOT = REPO / "published"
RECORD = PUBLISHED_ROOT / "manifest.json"
# A trainer's output that no service loads: kept out of the published copy.
NOT_SERVED = ("model.onnx", "model.safetensors", "pytorch_model.bin", "checkpoint.pt",
              "training_args.bin", "guard.provisional.json")  # fmt: skip


def served_files(model_dir: Path) -> list[Path]:
    """Every file of a published directory, relative to it, in a stable order."""
    return sorted(p.relative_to(model_dir) for p in model_dir.rglob("*") if p.is_file())


def tree_sha256(root: Path) -> str:
    """One digest over every file under `root` (relative path and content), for data dirs."""
    digest = hashlib.sha256()
    for rel in served_files(root):
        digest.update(str(rel).encode() + b"\0" + sha256_file(root / rel).encode() + b"\n")
    return digest.hexdigest()


def read_record(record: Path = RECORD) -> dict[str, Any]:
    if not record.is_file():
        return {"format": "ragrail-published/1", "models": {}}
    return json.loads(record.read_text(encoding="utf-8"))


def _git_commit() -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def _data_of(manifest: dict[str, Any]) -> dict[str, Any]:
    """The data a manifest names, with a digest over each local directory it names."""
    data = dict(manifest.get("data") or {})
    digests = {}
    for key in ("path", "covidqa", "xquad", "in_domain", "benign_docs"):
        value = data.get(key)
        if isinstance(value, str) and value:
            path = Path(value)
            path = path if path.is_absolute() else REPO / path
            packed = path.with_name(path.name + ".gz")  # shipped data is gzipped
            path = packed if not path.exists() and packed.is_file() else path
            if path.is_dir():
                digests[key] = tree_sha256(path)
            elif path.is_file():
                digests[key] = sha256_file(path)
            if path.is_relative_to(REPO):  # the repository's own data, wherever it is cloned
                data[key] = str(path.relative_to(REPO))
    if digests:
        data["sha256_of"] = digests
    return data


def published_dir(name_dir: Path) -> Path | None:
    """The directory a model (`<root>/<role>/<name>/`) is published in, if it is."""
    found = sorted(p.parent for p in name_dir.glob("*/manifest.json"))
    if len(found) > 1:
        raise SystemExit(
            f"{name_dir} holds {len(found)} published versions "
            f"({', '.join(p.name for p in found)}); one version of a model ships: remove all "
            "but the directory to publish over"
        )
    return found[0] if found else None


def publish(model_dir: Path, record: Path = RECORD, root: Path = PUBLISHED_ROOT) -> dict[str, Any]:
    """Copies what is served of a trainer's output `model_dir` (`.../<name>/<version>/`, a
    finished one: with its manifest) over the published copy of `<role>/<name>` (or, for a
    model not published yet, to `root/<role>/<name>/<version>/`), and records it in
    `record`."""
    model_dir = model_dir.resolve()
    manifest_file = model_dir / "manifest.json"
    if not manifest_file.is_file():
        raise SystemExit(f"{model_dir} holds no manifest.json: not a finished trainer output")
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    role = str(manifest.get("role") or model_dir.parent.parent.name)
    name = model_dir.parent.name
    target = published_dir(root / role / name) or root / role / name / model_dir.name
    rel = target.relative_to(root)
    if target.exists():
        shutil.rmtree(target)
    skip = shutil.ignore_patterns(*NOT_SERVED, ".work")
    shutil.copytree(model_dir, target, ignore=skip)
    params = manifest.get("params") or {}
    entry = {
        "path": str(Path(root.name) / rel),
        "role": role,
        "version": str(manifest.get("version") or model_dir.name),
        "created_at": manifest.get("created_at", ""),
        "command": manifest.get("command", ""),
        "seed": params.get("seed"),
        "data": _data_of(manifest),
        "recipe_commit": _git_commit(),
        "versions": manifest.get("versions", {}),
        "files": {
            str(f): {"sha256": sha256_file(target / f), "bytes": (target / f).stat().st_size}
            for f in served_files(target)
        },
    }
    published = read_record(record)
    published["models"]["/".join(rel.parts)] = entry
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(published, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return entry


def check(record: Path = RECORD, root: Path = PUBLISHED_ROOT) -> list[str]:
    """What differs between the published directories and the record ([] when all match)."""
    problems = []
    for ref, entry in read_record(record)["models"].items():
        model_dir = root / ref
        if not model_dir.is_dir():
            problems.append(f"{ref}: {model_dir} is missing")
            continue
        present = {str(f) for f in served_files(model_dir)}
        for name, want in entry["files"].items():
            path = model_dir / name
            if name not in present:
                problems.append(f"{ref}: {name} is missing")
            elif sha256_file(path) != want["sha256"]:
                problems.append(f"{ref}: {name} differs from its recorded sha256")
        for extra in sorted(present - set(entry["files"])):
            problems.append(f"{ref}: {extra} is not in the record")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers.publish", description=__doc__)
    parser.add_argument("model_dirs", nargs="*", type=Path, help="Trainer outputs to publish.")
    parser.add_argument("--check", action="store_true", help="Verify, write nothing.")
    args = parser.parse_args(argv)
    if args.check or not args.model_dirs:
        problems = check()
        for problem in problems:
            print(problem, file=sys.stderr)
        count = len(read_record()["models"])
        print(f"{count} published models, {'ok' if not problems else 'NOT ok'}")
        return 1 if problems else 0
    for model_dir in args.model_dirs:
        entry = publish(model_dir)
        total = sum(f["bytes"] for f in entry["files"].values())
        print(
            f"published {entry['version']} in {entry['path']}: {len(entry['files'])} files, "
            f"{total / 1e6:.1f} MB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
