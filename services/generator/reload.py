"""Switching registry versions on a running generator: SIGHUP.

With RAGRAIL_GENERATOR_REGISTRY_MODEL set, SIGHUP makes the service read its settings again
(environment and the RAGRAIL_CONFIG YAML, whose `generator.registry_model` may now name another
version) and resolve the registry again (a name without a version is its newest version). When
that is a different model, the new engine is loaded and started beside the running one, new
requests go to it, and the old engine finishes the requests it is running before it is closed:
no request fails or changes model midway. Loading needs memory for both models for a moment.
A version that cannot be resolved or loaded is logged and the running model kept.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import TYPE_CHECKING

from pydantic import ValidationError

from services.generator.backends import load_engine
from services.generator.model_files import from_registry
from services.generator.settings import GeneratorSettings
from shared.errors import RagrailError
from shared.server import on_sighup

if TYPE_CHECKING:
    from services.generator.server import GeneratorServicer

log = logging.getLogger(__name__)


class Reloader:
    def __init__(self, servicer: GeneratorServicer, settings: GeneratorSettings) -> None:
        self.servicer = servicer
        self.settings = settings
        self.serving = self._paths(settings)
        self.lock = asyncio.Lock()

    @staticmethod
    def _paths(settings: GeneratorSettings) -> tuple[str, str]:
        resolved = from_registry(settings)
        return resolved.model, resolved.adapter

    def _fresh_settings(self) -> GeneratorSettings:
        """The settings read again; the running ones when those name no registry model (a
        service built from arguments, as in tests, has nothing to re-read)."""
        try:
            fresh = GeneratorSettings()
        except (ValidationError, ValueError, OSError) as exc:
            log.error(
                "reload: settings are invalid now, keeping the model", extra={"error": str(exc)}
            )
            return self.settings
        return fresh if fresh.registry_model else self.settings

    async def reload(self) -> bool:
        """Switch to what the registry names now; True when the model changed."""
        async with self.lock:  # one switch at a time; a second SIGHUP waits
            settings = self._fresh_settings()
            try:
                paths = self._paths(settings)
                if paths == self.serving:
                    log.info(
                        "reload: already serving it", extra={"model": paths[0], "adapter": paths[1]}
                    )
                    return False
                engine = await asyncio.to_thread(load_engine, settings)
                await engine.start()
            except RagrailError as exc:
                log.error("reload: keeping the running model", extra={"error": exc.message})
                return False
            previous = self.serving
            self.settings, self.serving = settings, paths
            await self.servicer.switch(engine)
            log.info(
                "reload: switched model",
                extra={
                    "from": list(previous),
                    "to": list(paths),
                    "registry_model": settings.registry_model,
                },
            )
            return True


def install_reload(servicer: GeneratorServicer, settings: GeneratorSettings) -> Reloader | None:
    """SIGHUP reloads the registry model; without one it is logged and ignored (SIGHUP's
    default would end the process)."""
    loop = asyncio.get_running_loop()
    if not settings.registry_model:
        loop.add_signal_handler(
            signal.SIGHUP,
            lambda: log.warning("SIGHUP ignored: RAGRAIL_GENERATOR_REGISTRY_MODEL is not set"),
        )
        return None
    reloader = Reloader(servicer, settings)
    on_sighup(reloader.reload)
    return reloader
