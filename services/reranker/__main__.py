"""python -m services.reranker: run the reranker service."""

from services.reranker.server import build
from services.reranker.settings import RerankerSettings
from shared.server import run_service


def main() -> None:
    settings = RerankerSettings()
    run_service(settings, lambda: build(settings))


if __name__ == "__main__":
    main()
