"""The stages of a chat, one module each. A stage reads the ChatState that earlier stages
filled and adds its own result; `chat/serving.py` lists them in order.

A new stage is a module here with a `Stage` subclass (its `name`, `applies` and `run`; a
field of ChatState for its result if it has one) and one line in `ChatServing`'s
`before_generation` or `after_generation`: it is then traced (span `chat.<name>`), timed
(`ragrail_chat_stage_seconds{stage=<name>}`) and skipped when it does not apply. Another way
of answering (extractive, say) is a class with `complete(chat)` and `stream(chat)` like
`generate.Generate`, chosen in `ChatServing`."""

from __future__ import annotations

import time
from typing import ClassVar

from services.gateway.chat import metrics
from services.gateway.chat.state import ChatState
from services.gateway.http.clients import Services
from services.gateway.settings import GatewaySettings
from shared.tracing import tracer


class Stage:
    # Span `chat.<name>` and the ragrail_chat_stage_seconds label.
    name: ClassVar[str]
    # The StageTimings field this stage's time adds to, if any.
    timing: ClassVar[str | None] = None

    def __init__(self, services: Services, settings: GatewaySettings) -> None:
        self.services = services
        self.settings = settings

    def applies(self, chat: ChatState) -> bool:
        """Whether this stage has anything to do for this chat (else it is not run, timed or
        counted)."""
        return True

    async def run(self, chat: ChatState) -> None:
        raise NotImplementedError

    async def __call__(self, chat: ChatState) -> None:
        if not self.applies(chat):
            return
        start = time.perf_counter()
        with tracer.start_as_current_span(f"chat.{self.name}"):
            await self.run(chat)
        elapsed = time.perf_counter() - start
        metrics.STAGE_SECONDS.labels(self.name).observe(elapsed)
        if self.timing:
            spent = getattr(chat.timings, self.timing) + elapsed * 1000
            setattr(chat.timings, self.timing, round(spent, 2))
