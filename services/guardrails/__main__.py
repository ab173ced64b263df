"""python -m services.guardrails: run the guardrails service."""

import os

# Before NeMo Guardrails is imported: no usage statistics leave the machine.
os.environ.setdefault("NEMO_GUARDRAILS_NO_USAGE_STATS", "1")

from services.guardrails.server import build
from services.guardrails.settings import GuardrailsSettings
from shared.server import run_service


def main() -> None:
    settings = GuardrailsSettings()
    run_service(settings, lambda: build(settings))


if __name__ == "__main__":
    main()
