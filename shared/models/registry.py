"""The model registry: where trainers write models and services find them.

Layout: `<root>/<role>/<name>/<version>/` (root `models/` by default, `RAGRAIL_MODELS_DIR`
overrides it), each version a directory holding the model files and a `manifest.json`:

    {"role": "generator", "name": "smollm2-grounded", "version": "v1",
     "created_at": "2026-11-22T19:40:00+00:00",
     "base": "generator/smollm2-135m-instruct/base",   # registry ref or a description
     "method": "sft-lora", "format": "peft-lora",     # what the directory holds
     "data": {"sha256": ...}, "metrics": {...}}

`format` says how a service loads the directory: `hf` (a transformers model directory),
`peft-lora` (an adapter for the registry model named by `base`), `gguf` (a `file` entry
names the .gguf), `sentence-transformers`, `onnx`. Trainers written before this module
(embedder, reranker, guardrails) already write this layout; their manifests lack `role`,
which the directory supplies.

Services that take "the newest trained model" of a role (the reranker, the guardrails
classifier) find it with `newest(role, requires=FILE)`: the newest version holding the file
that service loads, including directories older trainers left without a manifest.

Published models: the project ships its default guard model and reader ready to load, in
`published/<role>/<name>/<directory>/` of the repository and of every image that serves them
(the version is the manifest's: a new one is published over the first directory, so that git
stores it as a delta). trainers/publish.py writes them; `published/manifest.json` records
their checksums and the command that trained them. A role with no model under the registry
root is looked up there: a model the user trained (or configured) always comes first.
`RAGRAIL_PUBLISHED_DIR` names another directory, or `none` to turn the fallback off.

Only the standard library (and shared.errors) is used: every service image ships `shared/`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.errors import FailedPrecondition

MODELS_DIR_ENV = "RAGRAIL_MODELS_DIR"
PUBLISHED_DIR_ENV = "RAGRAIL_PUBLISHED_DIR"
# The repository's (or the image's /app/) published/, beside shared/.
PUBLISHED_DIR = Path(__file__).resolve().parents[2] / "published"
LATEST = "latest"


class RegistryError(LookupError):
    """A name or version the registry does not hold, with what it does hold."""


@dataclass(frozen=True)
class Entry:
    """One registered model version."""

    role: str
    name: str
    version: str
    path: Path
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def ref(self) -> str:
        return f"{self.role}/{self.name}/{self.version}"

    @property
    def format(self) -> str:
        fmt = self.manifest.get("format", "")
        # Older trainers list every format they wrote; the first is the primary one.
        return str(fmt[0] if isinstance(fmt, list) and fmt else fmt or "")

    @property
    def created_at(self) -> float:
        try:
            return datetime.fromisoformat(self.manifest["created_at"]).timestamp()
        except (KeyError, TypeError, ValueError):
            return (self.path / "manifest.json").stat().st_mtime

    @property
    def base(self) -> str:
        return str(self.manifest.get("base", ""))


def models_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The registry root: the argument, else $RAGRAIL_MODELS_DIR, else ./models."""
    return Path(root or os.environ.get(MODELS_DIR_ENV) or "models").expanduser()


def published_root() -> Path | None:
    """Where published models are looked up when the registry root has none of a role:
    $RAGRAIL_PUBLISHED_DIR (`none`: nowhere), else the repository's published/."""
    setting = os.environ.get(PUBLISHED_DIR_ENV, "")
    if setting.strip().lower() == "none":
        return None
    return Path(setting).expanduser() if setting else PUBLISHED_DIR


def read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def manifest_version(path: Path, manifest: dict[str, Any] | None = None) -> str:
    """The version a model directory's manifest names ("" for none): a published model is
    republished over its first directory (trainers/publish.py), so its directory's name is
    not its version."""
    data = read_manifest(path) if manifest is None else manifest
    return str(data.get("version") or "")


def entries(role: str, name: str = "", root: str | os.PathLike[str] | None = None) -> list[Entry]:
    """Every version of `role` (and of `name`, when given) with a manifest, oldest first; with
    no `root` given and none under the registry root, the published ones."""

    def under(base: Path, published: bool = False) -> list[Entry]:
        pattern = f"{name}/*/manifest.json" if name else "*/*/manifest.json"
        found = []
        for p in (base / role).glob(pattern):
            data = read_manifest(p.parent)
            version = p.parent.name
            if published:
                version = manifest_version(p.parent, data) or version
            found.append(Entry(role, p.parent.parent.name, version, p.parent, data))
        return sorted(found, key=lambda e: (e.created_at, e.name, e.version))

    found = under(models_root(root))
    published = published_root() if root is None else None
    if not found and published is not None:
        found = under(published, published=True)
    return found


def resolve(
    role: str, name: str, version: str = LATEST, root: str | os.PathLike[str] | None = None
) -> Entry:
    """The version of `role/name`; "latest" (or empty) is the newest by manifest created_at."""
    versions = entries(role, name, root)
    if not versions:
        known = sorted({e.name for e in entries(role, root=root)})
        raise RegistryError(
            f"no model {role}/{name} in the registry at {models_root(root)}; "
            f"{role} models there: {known or 'none'}"
        )
    if version in ("", LATEST):
        return versions[-1]
    for entry in versions:
        if entry.version == version:
            return entry
    raise RegistryError(
        f"{role}/{name} has no version {version!r}; versions: {[e.version for e in versions]}"
    )


def resolve_ref(ref: str, root: str | os.PathLike[str] | None = None) -> Entry:
    """An entry from "role/name" or "role/name/version"."""
    parts = ref.strip("/").split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise RegistryError(f"{ref!r} is no registry reference; write role/name[/version]")
    return resolve(parts[0], parts[1], parts[2] if len(parts) == 3 else LATEST, root)


def version_dir(
    role: str, name: str, version: str, root: str | os.PathLike[str] | None = None
) -> Path:
    return models_root(root) / role / name / version


def manifest(
    role: str, name: str, version: str, *, base: str, method: str, fmt: str, **extra: Any
) -> dict[str, Any]:
    """A manifest with the fields every registry entry has; `extra` adds data, metrics..."""
    return {
        "role": role,
        "name": name,
        "version": version,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "base": base,
        "method": method,
        "format": fmt,
        **extra,
    }


def write_manifest(path: Path, data: dict[str, Any]) -> None:
    """manifest.json written last and atomically: a directory with a manifest is complete."""
    tmp = path / "manifest.json.tmp"
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path / "manifest.json")


def newest(
    role: str,
    requires: str = "manifest.json",
    *,
    role_dir: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
) -> Entry | None:
    """The newest version of any `role` model (`<role_dir>/<name>/<version>/`, role_dir
    `<root>/<role>` by default, relative to the working directory) that holds `requires`:
    newest by its manifest's created_at, else, for a directory without one, by the
    modification time of `requires`. None when there is none."""
    base = Path.cwd() / Path(role_dir or models_root(root) / role).expanduser()

    def created(entry: Entry) -> float:
        try:
            return datetime.fromisoformat(entry.manifest["created_at"]).timestamp()
        except (KeyError, TypeError, ValueError):
            return (entry.path / requires).stat().st_mtime

    found = [
        Entry(role, p.parent.parent.name, p.parent.name, p.parent, read_manifest(p.parent))
        for p in base.glob(f"*/*/{requires}")
        if p.is_file()
    ]
    return max(found, key=lambda e: (created(e), str(e.path)), default=None)


def configured_dir(setting: str, missing: str) -> Path | None:
    """The model directory a setting names (None when the setting is empty); one that is
    not a directory stops the caller with `missing`, formatted with {path}."""
    if not setting:
        return None
    path = Path(setting).expanduser()
    if not path.is_dir():
        raise FailedPrecondition(missing.format(path=path))
    return path


def listing(role: str = "", root: str | os.PathLike[str] | None = None) -> list[Entry]:
    """Every entry of a role, or of every role, oldest first."""
    base = models_root(root)
    if not base.is_dir():
        return []
    roles = [role] if role else sorted(p.name for p in base.iterdir() if p.is_dir())
    return [e for r in roles for e in entries(r, root=root)]
