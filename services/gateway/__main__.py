"""python -m services.gateway: run the REST gateway with uvicorn."""

import uvicorn

from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings
from shared.logging import configure_logging
from shared.tracing import setup_tracing, shutdown_tracing


def main() -> None:
    settings = GatewaySettings()
    configure_logging("gateway", settings.log_level, settings.log_format)
    setup_tracing("gateway")
    try:
        uvicorn.run(
            create_app(settings),
            host=settings.host,
            port=settings.port,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=int(settings.shutdown_grace_s),
        )
    finally:
        shutdown_tracing()


if __name__ == "__main__":
    main()
