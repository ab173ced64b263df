"""Generator engines, chosen by `RAGRAIL_GENERATOR_ENGINE` from the ENGINES table.

This package holds only engines: the contract (base.py) and one module per engine, with the
parts of two engines beside theirs (triton_protocols.py; openai_stream.py and
openai_tokenize.py). What engines share lives one level up: chat_template.py (chat
templates and tokenizers), model_files.py (the files a registry version names) and
scheduler.py (continuous batching for engines that run the model in this process).

Add an engine by naming its class in ENGINES and its name in settings.EngineName (a test
checks that the two agree); docs/adding-a-generator-engine.md has the steps. Engines are
imported only when chosen, so the service loads the heavy packages of the engine it runs and
no other.
"""

from __future__ import annotations

from services.generator.backends.base import Engine
from services.generator.model_files import from_registry
from services.generator.settings import GeneratorSettings
from shared.backends import backend_class
from shared.errors import FailedPrecondition

ENGINES: dict[str, str] = {
    "llamacpp": "services.generator.backends.llamacpp:LlamaCppEngine",
    "torch": "services.generator.backends.torch:TorchEngine",
    "triton": "services.generator.backends.triton:TritonEngine",
    "openai": "services.generator.backends.openai:OpenAIEngine",
}


def load_engine(settings: GeneratorSettings) -> Engine:
    try:
        cls = backend_class("generator", settings.engine, ENGINES)
    except FailedPrecondition as exc:
        # backend_class names the usual RAGRAIL_<SERVICE>_BACKEND; this service says ENGINE.
        raise FailedPrecondition(exc.message.replace("_BACKEND", "_ENGINE")) from exc
    engine: Engine = cls(from_registry(settings))
    return engine
