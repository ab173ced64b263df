"""Generator engines, chosen by `RAGRAIL_GENERATOR_ENGINE`.

An engine implements `backends.base.Engine`; add one by naming its class here (and in the
`engine` Literal of settings.py). Engines are imported only when chosen, so the service
loads the heavy packages of the engine it runs and no other.
"""

from __future__ import annotations

from services.generator.backends.base import Engine
from services.generator.backends.models import from_registry
from services.generator.settings import GeneratorSettings
from shared.backends import backend_class
from shared.errors import FailedPrecondition

ENGINES: dict[str, str] = {
    "llamacpp": "services.generator.backends.llamacpp:LlamaCppEngine",
    "torch": "services.generator.backends.torch:TorchEngine",
    "triton": "services.generator.backends.triton:TritonEngine",
}


def load_engine(settings: GeneratorSettings) -> Engine:
    try:
        cls = backend_class("generator", settings.engine, ENGINES)
    except FailedPrecondition as exc:
        # backend_class names the usual RAGRAIL_<SERVICE>_BACKEND; this service says ENGINE.
        raise FailedPrecondition(exc.message.replace("_BACKEND", "_ENGINE")) from exc
    engine: Engine = cls(from_registry(settings))
    return engine
