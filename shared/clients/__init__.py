"""gRPC clients of the ragrail services: `ServiceClient` (channel, deadline, retries of
UNAVAILABLE, errors naming the peer) and, on it, one typed client per service contract."""

from shared.clients.base import ServiceClient, TypedClient, grpc_serving, make_channel
from shared.clients.embedder import EmbedderClient, EmbedderInfo, Embeddings, TokenOffsets
from shared.clients.generator import (
    GenerateResult,
    GeneratorClient,
    GeneratorInfo,
    Sampling,
    StreamChunk,
    TokenCounts,
    Usage,
)
from shared.clients.guardrails import GuardrailsClient, RailVerdict
from shared.clients.reranker import Ranked, RerankerClient
from shared.clients.retriever import RetrieverClient

__all__ = [
    "EmbedderClient",
    "EmbedderInfo",
    "Embeddings",
    "GenerateResult",
    "GeneratorClient",
    "GeneratorInfo",
    "GuardrailsClient",
    "RailVerdict",
    "Ranked",
    "RerankerClient",
    "RetrieverClient",
    "Sampling",
    "ServiceClient",
    "StreamChunk",
    "TokenCounts",
    "TokenOffsets",
    "TypedClient",
    "Usage",
    "grpc_serving",
    "make_channel",
]
