"""Guardrails gRPC servicer: validates requests, runs the configured rails, answers with the
verdict, the deciding rail, why, the modified text and each rail's timing."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

# Before NeMo Guardrails is imported anywhere: it would otherwise report usage online.
os.environ.setdefault("NEMO_GUARDRAILS_NO_USAGE_STATS", "1")

import grpc
import numpy as np

from services.guardrails.engine import ENGINES, Engine
from services.guardrails.rail_config import add_rail_flows
from services.guardrails.railset import (
    PENDING_REASON,
    RailSet,
    embedding_source,
    load_railset,
    paired_encoder,
)
from services.guardrails.reload import install_reload
from services.guardrails.results import Check
from services.guardrails.settings import GuardrailsSettings
from shared.errors import FailedPrecondition, InvalidArgument
from shared.models.classifier import InjectionClassifier
from shared.models.guard import GuardModel
from shared.models.registry import manifest_version
from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2, guardrails_pb2_grpc
from shared.server import Built, ServiceSpec
from shared.verdict import Verdict
from shared.version import VERSION

log = logging.getLogger(__name__)
ROLES = ("system", "user", "assistant")


def to_proto(check: Check) -> guardrails_pb2.RailResult:
    return guardrails_pb2.RailResult(
        verdict=check.verdict.proto,
        rail=check.rail,
        reason=check.reason,
        modified_text=check.text if check.verdict == Verdict.MODIFY else "",
        activations=[
            guardrails_pb2.RailActivation(
                rail=a.rail,
                verdict=a.verdict.proto,
                reason=a.reason,
                duration_ms=a.ms,
                errored=a.errored,
            )
            for a in check.activations
        ],
        duration_ms=check.ms,
    )


class GuardrailsServicer(guardrails_pb2_grpc.GuardrailsServicer):
    def __init__(self, engine: Engine, settings: GuardrailsSettings, info: dict[str, str]) -> None:
        self.settings = settings
        # One attribute, so a reload (reload.py) swaps engine and info together; a check
        # holds the engine it started on until it finishes.
        self.loaded = (engine, info)

    @property
    def engine(self) -> Engine:
        return self.loaded[0]

    @property
    def info(self) -> dict[str, str]:
        return self.loaded[1]

    def switch(self, engine: Engine, info: dict[str, str]) -> None:
        """Serve new checks with `engine` from now on; checks running keep the old one."""
        self.loaded = (engine, info)

    def _text(self, field: str, text: str, required: bool = True) -> None:
        if required and not text.strip():
            raise InvalidArgument(f"{field} is empty or whitespace; send the text to check")
        if len(text) > self.settings.max_text_chars:
            raise InvalidArgument(
                f"{field} has {len(text)} characters; the limit is "
                f"{self.settings.max_text_chars} (RAGRAIL_GUARDRAILS_MAX_TEXT_CHARS)"
            )

    def _messages(self, messages: Any, need_user_last: bool) -> list[dict[str, str]]:
        if len(messages) > self.settings.max_messages:
            raise InvalidArgument(
                f"{len(messages)} messages; the limit is {self.settings.max_messages} "
                "(RAGRAIL_GUARDRAILS_MAX_MESSAGES)"
            )
        out = []
        for i, m in enumerate(messages):
            if m.role not in ROLES:
                raise InvalidArgument(f"messages[{i}].role is '{m.role}'; use one of {ROLES}")
            self._text(f"messages[{i}].content", m.content, required=m.role == "user")
            # NeMo Guardrails' rails read the conversation's user and assistant turns.
            if m.role != "system":
                out.append({"role": m.role, "content": m.content})
        if need_user_last and (not out or out[-1]["role"] != "user"):
            raise InvalidArgument(
                "the last message must be the user's (role 'user'): it is checked"
            )
        return out

    def _passages(self, field: str, passages: Any) -> list[str]:
        if len(passages) > self.settings.max_chunks:
            raise InvalidArgument(
                f"{len(passages)} {field}; the limit is {self.settings.max_chunks} "
                "(RAGRAIL_GUARDRAILS_MAX_CHUNKS)"
            )
        for i, p in enumerate(passages):
            self._text(f"{field}[{i}].text", p.text)
        return [p.text for p in passages]

    async def CheckInput(
        self, request: guardrails_pb2.CheckInputRequest, context: grpc.aio.ServicerContext
    ) -> guardrails_pb2.RailResult:
        if not request.messages:
            raise InvalidArgument("messages is empty; send at least the user's message")
        messages = self._messages(request.messages, need_user_last=True)
        return to_proto(await self.engine.check_input(messages))

    async def CheckRetrieval(
        self, request: guardrails_pb2.CheckRetrievalRequest, context: grpc.aio.ServicerContext
    ) -> guardrails_pb2.CheckRetrievalResponse:
        self._text("query", request.query, required=False)
        chunks = self._passages("chunks", request.chunks)
        loop = asyncio.get_running_loop()
        started = loop.time()
        checks = await self.engine.check_retrieval(request.query, chunks)
        return guardrails_pb2.CheckRetrievalResponse(
            chunks=[
                guardrails_pb2.ChunkVerdict(id=p.id, result=to_proto(c))
                for p, c in zip(request.chunks, checks, strict=True)
            ],
            duration_ms=round((loop.time() - started) * 1000, 3),
        )

    async def CheckOutput(
        self, request: guardrails_pb2.CheckOutputRequest, context: grpc.aio.ServicerContext
    ) -> guardrails_pb2.RailResult:
        self._text("answer", request.answer)
        messages = self._messages(request.messages, need_user_last=False)
        passages = self._passages("context", request.context)
        check = await self.engine.check_output(
            messages, request.answer, passages, grounded=request.grounded
        )
        return to_proto(check)

    async def Info(
        self, request: common_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> guardrails_pb2.GuardrailsInfo:
        engine, info = self.loaded
        return guardrails_pb2.GuardrailsInfo(
            service=common_pb2.ServiceInfo(
                service="guardrails",
                version=VERSION,
                backend=f"nemoguardrails ({engine.name})",
                model=info["injection_model"],
                details=info,
            ),
            input_rails=engine.input_rails,
            retrieval_rails=engine.retrieval_rails,
            output_rails=engine.output_rails,
        )


def load_rails_config(path: Path) -> Any:
    """The NeMo Guardrails configuration in `path`, with the flows of ragrail's rails
    (services/guardrails/rails/<rail>/flows.co) it does not define itself."""
    from nemoguardrails import RailsConfig

    if not (path / "config.yml").is_file():
        raise FailedPrecondition(
            f"{path} holds no config.yml; set RAGRAIL_GUARDRAILS_CONFIG_DIR to a NeMo "
            "Guardrails configuration directory (see services/guardrails/config)"
        )
    try:
        rails_config = RailsConfig.from_path(str(path))
    except Exception as exc:
        raise FailedPrecondition(
            f"cannot load the NeMo Guardrails configuration in {path}: {type(exc).__name__}: "
            f"{str(exc)[:500]}"
        ) from exc
    overridden = add_rail_flows(rails_config)
    if overridden:
        log.info("rail flows the configuration defines itself", extra={"flows": overridden})
    return rails_config


def nemo_embedder(rails_config: Any, threads: int) -> Any:
    """NeMo Guardrails' configured embedding model (config.yml `models`, type embeddings), as
    an embed function; `ragrail_onnx` with `model: default` is the trainer's paired encoder."""

    def build(classifier: InjectionClassifier | GuardModel | None) -> Any:
        from nemoguardrails.embeddings.providers import init_embedding_model

        from services.guardrails import embeddings

        entry = next((m for m in rails_config.models if m.type == "embeddings"), None)
        if entry is None:
            return paired_encoder(classifier, threads)
        if classifier is None:  # nothing trained yet: the packaged MiniLM
            embeddings.set_default_encoder(embeddings.packaged())
        else:
            path, onnx_file = embedding_source(classifier)
            embeddings.set_default(path, onnx_file, threads)
        try:
            model = init_embedding_model(entry.model, entry.engine, entry.parameters or {})
        except FailedPrecondition:
            raise
        except Exception as exc:
            raise FailedPrecondition(
                f"cannot load the embedding model of config.yml (engine {entry.engine}, model "
                f"{entry.model}): {type(exc).__name__}: {str(exc)[:300]}"
            ) from exc
        if hasattr(model, "embed"):
            return model.embed
        return lambda texts: np.asarray(model.encode(list(texts)), dtype=np.float32)

    return build


def load_rails(settings: GuardrailsSettings) -> tuple[Any, RailSet]:
    """The NeMo Guardrails configuration and ragrail's rails (models loaded) it names."""
    config_dir = settings.config_path()
    rails_config = load_rails_config(config_dir)
    railset = load_railset(
        settings,
        rails_config,
        config_dir / "config.yml",
        nemo_embedder(rails_config, settings.threads),
    )
    return rails_config, railset


def model_info(railset: RailSet) -> dict[str, str]:
    """Info details on the models: `guard_model` is its directory, `pending` (not trained
    yet: its rails allow) or `none` (an older injection classifier is configured)."""
    classifier = railset.classifier
    guard = railset.resources.guard
    info = {
        "injection_model": (
            str(classifier.path / classifier.onnx_file) if classifier is not None else "pending"
        ),
        "guard_model": str(guard.model.path) if guard is not None else "none",
    }
    if guard is not None and (version := manifest_version(Path(guard.model.path))):
        info["guard_model_version"] = version
    if railset.pending:
        info.update(guard_model="pending", guard_model_status=PENDING_REASON)
    return info


def load_engine(settings: GuardrailsSettings) -> tuple[Engine, dict[str, str]]:
    """The engine on the configured rails and models, and the Info details; at startup and
    on each reload (SIGHUP, reload.py)."""
    config_dir = settings.config_path()
    rails_config, railset = load_rails(settings)
    engine = ENGINES[settings.engine](rails_config, railset, settings.colang_speedups)
    info = {
        "engine": settings.engine,
        "colang_speedups": str(engine.speedups).lower(),
        "config_dir": str(config_dir),
        **model_info(railset),
        **railset.info(),
    }
    if railset.pending:
        pending = [r for r, v in railset.info().items() if v == "pending"]
        log.warning(
            "guard model not trained yet: its rails allow everything until it is",
            extra={"pending_rails": pending, "how": PENDING_REASON},
        )
    return engine, info


async def build(settings: GuardrailsSettings) -> Built:
    if settings.log_level != "DEBUG":
        # NeMo Guardrails logs every Colang event at INFO: pages per check.
        logging.getLogger("nemoguardrails").setLevel(logging.WARNING)
    engine, info = await asyncio.to_thread(load_engine, settings)
    servicer = GuardrailsServicer(engine, settings, info)
    install_reload(servicer, settings, load_engine)
    return Built(
        specs=[
            ServiceSpec.of(
                guardrails_pb2, servicer, guardrails_pb2_grpc.add_GuardrailsServicer_to_server
            )
        ],
        ready_message=info,
    )
