"""python -m services.embedder: run the embedder service."""

from services.embedder.server import build
from services.embedder.settings import EmbedderSettings
from shared.server import run_service


def main() -> None:
    settings = EmbedderSettings()
    run_service(settings, lambda: build(settings))


if __name__ == "__main__":
    main()
