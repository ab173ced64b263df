"""The registry version a generator trainer that starts from a registered model (DPO,
distillation) writes: its directory, refused when a finished model is there, and what it
leaves beside the weights (metrics.json, then the manifest, which marks it finished)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from shared.models import registry
from trainers.data import run_params
from trainers.generator.data import files_sha256


def merged_version(ref: str, root: str | None, error_prefix: str = "") -> registry.Entry:
    """The hf registry entry a trainer starts from: `ref` is name[/version] (latest when
    left out; a leading generator/ is allowed), and a LoRA version is merged into its base
    first (a registry version of its own). A ref the registry lacks stops the run."""
    from trainers.generator.export import merge

    name, _, version = ref.removeprefix("generator/").partition("/")
    try:
        entry = registry.resolve("generator", name, version or registry.LATEST, root)
    except registry.RegistryError as exc:
        raise SystemExit(f"{error_prefix}{exc}") from exc
    return merge(entry, root)


def add_version_arguments(
    p: argparse.ArgumentParser, name: str, version: str, overwritten: str = "the version"
) -> None:
    """--name, --version, --models-dir and --overwrite: where a recipe registers its model
    (what new_version_dir reads); `overwritten` says what --overwrite replaces."""
    p.add_argument("--name", default=name, help="registry model name")
    p.add_argument("--version", default=version, help="registry version")
    p.add_argument("--models-dir", default=None, help="registry root (default models/)")
    p.add_argument(
        "--overwrite", action="store_true", help=f"replace a finished model in {overwritten}"
    )


def new_version_dir(args: argparse.Namespace) -> Path:
    """generator/<--name>/<--version> under --models-dir; a finished model there stops the run
    unless --overwrite."""
    out = registry.version_dir("generator", args.name, args.version, args.models_dir)
    if (out / "manifest.json").is_file() and not args.overwrite:
        raise SystemExit(f"{out} holds a finished model; pass --overwrite or a new --version")
    return out


def save_version(
    out: Path,
    args: argparse.Namespace,
    metrics: dict[str, Any],
    data_files: list[Path],
    *,
    base: str,
    method: str,
    fmt: str,
    **fields: Any,
) -> None:
    """metrics.json and the manifest (data: --data and the sha256 of the data_files read;
    fields: what this trainer adds), then the metrics and the directory on stdout."""
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    registry.write_manifest(
        out,
        registry.manifest(
            "generator",
            args.name,
            args.version,
            base=base,
            method=method,
            fmt=fmt,
            **fields,
            data={"path": str(args.data), "sha256": files_sha256(data_files)},
            metrics=metrics,
            params=run_params(args, "models_dir", "overwrite"),
        ),
    )
    print(json.dumps(metrics, indent=2))
    print(f"saved to {out}")
