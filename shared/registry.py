"""The model registry now lives in shared/models/registry.py; this module keeps the old
import path (`from shared import registry`) working for the generator and its trainers."""

from shared.models.registry import (
    LATEST,
    MODELS_DIR_ENV,
    Entry,
    RegistryError,
    entries,
    listing,
    manifest,
    models_root,
    newest,
    read_manifest,
    resolve,
    resolve_ref,
    version_dir,
    write_manifest,
)

__all__ = [
    "LATEST",
    "MODELS_DIR_ENV",
    "Entry",
    "RegistryError",
    "entries",
    "listing",
    "manifest",
    "models_root",
    "newest",
    "read_manifest",
    "resolve",
    "resolve_ref",
    "version_dir",
    "write_manifest",
]
