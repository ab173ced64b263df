"""python -m services.generator: run the generator service."""

from services.generator.server import build
from services.generator.settings import GeneratorSettings
from shared.server import run_service


def main() -> None:
    settings = GeneratorSettings()
    run_service(settings, lambda: build(settings))


if __name__ == "__main__":
    main()
