"""What the model services (embedder, reranker) share around their model: one forward pass
at a time on a thread of its own, text checks with actionable errors, the `Info` header,
the onnx-on-cpu rule and the startup wiring."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from shared.errors import FailedPrecondition, InvalidArgument
from shared.models.encoder import length_batches
from shared.models.settings import ModelServiceSettings
from shared.proto.ragrail.v1 import common_pb2
from shared.server import BlockingRunner, Built, ServiceSpec
from shared.version import VERSION

log = logging.getLogger(__name__)
Model = TypeVar("Model")
Settings = TypeVar("Settings", bound=ModelServiceSettings)


def load_model(settings: Settings, backends: dict[str, Callable[[Settings], Model]]) -> Model:
    """The model RAGRAIL_<SERVICE>_BACKEND names, built from the settings by `backends`."""
    model: Any = backends[settings.backend](settings)
    log.info(
        f"{settings.service_name} model loaded",
        extra={
            "model": model.model_name,
            "backend": model.name,
            "device": model.device,
            "max_length": model.max_length,
        },
    )
    return model  # type: ignore[no-any-return]


def onnx_on_cpu(service: str, device: str) -> None:
    """The onnx backend runs on cpu only (auto means cpu for it)."""
    if device not in ("cpu", "auto"):
        prefix = f"RAGRAIL_{service.upper()}"
        raise FailedPrecondition(
            f"{prefix}_DEVICE={device}: the onnx backend runs on cpu only; "
            f"use cpu, or {prefix}_BACKEND=sentence-transformers for a GPU"
        )


class ModelServicer(Generic[Model, Settings]):
    """Base of a model service's servicer: `self.backend` is the loaded model, `run` calls
    it off the event loop."""

    proto: ClassVar[Any]  # the generated *_pb2 module of the one service it implements
    add_to_server: ClassVar[Callable[..., None]]  # its *_pb2_grpc.add_*Servicer_to_server

    def __init__(self, backend: Model, settings: Settings) -> None:
        self.backend = backend
        self.settings = settings
        self.service = settings.service_name
        # One model, one forward pass at a time: two concurrent passes only fight for the cores.
        self._model_thread = BlockingRunner(1, self.service)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._model_thread(fn, *args)

    async def run_in_parts(
        self, fn: Callable[[list[str]], np.ndarray], texts: list[str], part_size: int
    ) -> np.ndarray:
        """`fn` on parts of at most `part_size` texts, longest first, one `run` each; rows
        back in input order. A caller that leaves (a deadline, a cancel) stops the work at
        the next part: one call for 2,048 texts kept the model busy long after nobody waited
        for the answer, and the next caller timed out behind it."""
        if len(texts) <= part_size:
            return await self.run(fn, texts)  # type: ignore[no-any-return]
        out: np.ndarray | None = None
        for rows in length_batches([len(t) for t in texts], part_size, split=False):
            part = await self.run(fn, [texts[i] for i in rows])
            if out is None:
                out = np.empty((len(texts), *part.shape[1:]), dtype=part.dtype)
            out[rows] = part
        assert out is not None
        return out

    def check_texts(self, texts: Sequence[str], what: str, hint: str = "chunk it first") -> None:
        """Each text non-blank and within max_text_chars; errors name the item."""
        limit = self.settings.max_text_chars
        for i, text in enumerate(texts):
            if not text.strip():
                raise InvalidArgument(f"{what.format(i=i)} is empty or whitespace; remove it")
            if len(text) > limit:
                raise InvalidArgument(
                    f"{what.format(i=i)} has {len(text)} characters; the limit is {limit}"
                    f"{self.limit_setting('max_text_chars')}: {hint}"
                )

    def limit_setting(self, field: str) -> str:
        """ " (RAGRAIL_<SERVICE>_<FIELD>)", naming the setting that raises a limit."""
        return f" (RAGRAIL_{self.service.upper()}_{field.upper()})"

    def service_info(self, **details: str) -> common_pb2.ServiceInfo:
        backend: Any = self.backend
        return common_pb2.ServiceInfo(
            service=self.service,
            version=VERSION,
            backend=backend.name,
            model=backend.model_name,
            details={
                "device": backend.device,
                "batch_size": str(self.settings.batch_size),
                **details,
            },
        )

    def ready_message(self) -> dict[str, Any]:
        """What the "ready" log line says about the model."""
        backend: Any = self.backend
        return {"model": backend.model_name, "backend": backend.name}

    async def close(self) -> None:
        self._model_thread.shutdown()


async def build_model_service(
    settings: Settings,
    load: Callable[[Settings], Model],
    servicer_cls: type[ModelServicer[Model, Settings]],
) -> Built:
    """Loads the model off the event loop and wires its servicer."""
    backend = await asyncio.to_thread(load, settings)
    servicer = servicer_cls(backend, settings)
    return Built(
        specs=[ServiceSpec.of(servicer.proto, servicer, type(servicer).add_to_server)],
        close=servicer.close,
        ready_message=servicer.ready_message(),
    )
