"""python -m services.retriever: run the retriever service."""

from services.retriever.server import build
from services.retriever.settings import RetrieverSettings
from shared.server import run_service


def main() -> None:
    settings = RetrieverSettings()
    run_service(settings, lambda: build(settings))


if __name__ == "__main__":
    main()
