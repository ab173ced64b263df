"""Reloading the rails on a running guardrails service: SIGHUP.

SIGHUP makes the service read its settings again (environment and the RAGRAIL_CONFIG YAML),
look for the guard model again (a newly trained one under models/guardrails/ included) and
build a new engine from its configuration directory, on a worker thread, while the running
engine keeps answering. The new engine and its Info details then replace the old ones in one
step: checks already running finish on the old engine, new ones run on the new. A reload that
fails (a model or config.yml that does not load) is logged with why, and the running engine
kept. `ragrail up` sends SIGHUP when it has trained the guard model on a first start, so the
rails that were pending run without restarting the suite.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import ValidationError

from services.guardrails.settings import GuardrailsSettings
from shared.errors import RagrailError
from shared.server import on_sighup

if TYPE_CHECKING:
    from services.guardrails.engine import Engine
    from services.guardrails.server import GuardrailsServicer

log = logging.getLogger(__name__)
LoadEngine = Callable[[GuardrailsSettings], "tuple[Engine, dict[str, str]]"]


class Reloader:
    def __init__(
        self, servicer: GuardrailsServicer, settings: GuardrailsSettings, load: LoadEngine
    ) -> None:
        self.servicer = servicer
        self.settings = settings
        self.load = load
        self.lock = asyncio.Lock()

    def _fresh_settings(self) -> GuardrailsSettings:
        """The settings read again; the running ones when they no longer validate."""
        try:
            return GuardrailsSettings()
        except (ValidationError, ValueError, OSError) as exc:
            log.error(
                "reload: settings are invalid now, reloading with the running ones",
                extra={"error": str(exc)},
            )
            return self.settings

    async def reload(self) -> bool:
        """Build the engine again and switch to it; False (old engine kept) when that fails."""
        async with self.lock:  # one reload at a time; a second SIGHUP waits for the first
            settings = self._fresh_settings()
            try:
                engine, info = await asyncio.to_thread(self.load, settings)
            except RagrailError as exc:
                log.error("reload failed: keeping the running rails", extra={"error": exc.message})
                return False
            except Exception as exc:  # anything else must not end the service either
                log.error(
                    "reload failed: keeping the running rails",
                    exc_info=exc,
                    extra={"error": f"{type(exc).__name__}: {str(exc)[:300]}"},
                )
                return False
            previous = self.servicer.info
            self.settings = settings
            self.servicer.switch(engine, info)
            log.info(
                "reload: rails switched",
                extra={
                    "guard_model": info.get("guard_model", ""),
                    "was": previous.get("guard_model", ""),
                    "input_rails": engine.input_rails,
                },
            )
            return True


def install_reload(
    servicer: GuardrailsServicer, settings: GuardrailsSettings, load: LoadEngine
) -> Reloader:
    """SIGHUP reloads the rails."""
    reloader = Reloader(servicer, settings, load)
    on_sighup(reloader.reload)
    return reloader
