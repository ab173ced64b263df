"""`python -m trainers.quantize ...` as a user runs it, for the quantizer tests."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def run_quantize(*argv: str, code: int = 0) -> str:
    """Runs the command offline, without the caller's RAGRAIL_* settings; returns its stdout,
    and fails the test with the end of both streams unless it exits with `code`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGRAIL_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    result = subprocess.run(
        [sys.executable, "-m", "trainers.quantize", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == code, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout
