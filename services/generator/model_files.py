"""The model files a registry version names, put into the generator's settings.

The packaged GGUF and a configured path are resolved by shared/models/generator_files.py,
which the benchmarks share; what is here needs the service's settings."""

from __future__ import annotations

from services.generator.settings import GeneratorSettings
from shared.errors import FailedPrecondition
from shared.models import registry


def from_registry(settings: GeneratorSettings) -> GeneratorSettings:
    """The settings with model (and adapter) filled in from the registry version that
    `registry_model` names; unchanged when it names none."""
    if not settings.registry_model:
        return settings
    name, _, version = settings.registry_model.partition("/")
    try:
        entry = registry.resolve("generator", name, version or registry.LATEST, settings.models_dir)
        update = registry_paths(entry, settings.engine, settings.models_dir)
    except registry.RegistryError as exc:
        raise FailedPrecondition(f"RAGRAIL_GENERATOR_REGISTRY_MODEL: {exc}") from exc
    return settings.model_copy(update=update)


def registry_paths(entry: registry.Entry, engine: str, root: str) -> dict[str, str]:
    """{"model": ..., "adapter": ...} for a registry entry, by its manifest's format."""
    fmt = entry.format
    if fmt == "peft-lora":
        if engine != "torch":
            raise registry.RegistryError(
                f"{entry.ref} is a LoRA adapter, which only the torch engine loads; export a "
                f"merged GGUF for llamacpp (ragrail export gguf {entry.ref})"
            )
        base = registry.resolve_ref(entry.base, root)
        return {"model": str(base.path), "adapter": str(entry.path)}
    if fmt == "gguf":
        return {"model": str(entry.path / str(entry.manifest.get("file", "model.gguf")))}
    if fmt == "hf":
        if engine == "llamacpp":
            raise registry.RegistryError(
                f"{entry.ref} is a Hugging Face directory; llamacpp loads GGUF (ragrail "
                f"export gguf {entry.ref}), or set RAGRAIL_GENERATOR_ENGINE=torch"
            )
        return {"model": str(entry.path)}
    raise registry.RegistryError(f"{entry.ref} has format {fmt!r}, which no engine loads")
