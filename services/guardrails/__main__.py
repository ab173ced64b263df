"""python -m services.guardrails: run the guardrails service."""

import os

# Before NeMo Guardrails is imported: no usage statistics leave the machine.
os.environ.setdefault("NEMO_GUARDRAILS_NO_USAGE_STATS", "1")
# Before numpy is imported: its BLAS on one thread. The packaged MiniLM (minilm.py, before a
# guard model is trained) multiplies small matrices, and OpenBLAS's threads waiting for busy
# cores made one message's embedding 400 ms instead of 11 (measured on 2 shared cores).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from services.guardrails.server import build
from services.guardrails.settings import GuardrailsSettings
from shared.server import run_service


def main() -> None:
    settings = GuardrailsSettings()
    run_service(settings, lambda: build(settings))


if __name__ == "__main__":
    main()
