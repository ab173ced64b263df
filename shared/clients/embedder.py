"""Typed client of the embedder service (Embed, Tokenize, Info)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from shared.clients.base import TypedClient
from shared.proto.ragrail.v1 import common_pb2, embedder_pb2, embedder_pb2_grpc

InputType = Literal["query", "passage"]
_INPUT_TYPES = {
    "query": embedder_pb2.INPUT_TYPE_QUERY,
    "passage": embedder_pb2.INPUT_TYPE_PASSAGE,
}


@dataclass(frozen=True, slots=True)
class EmbedderInfo:
    model: str
    dimension: int
    max_length: int  # input tokens the model reads
    query_prefix: str
    passage_prefix: str


@dataclass(frozen=True, slots=True)
class Embeddings:
    vectors: list[list[float]]
    model: str
    total_tokens: int


@dataclass(frozen=True, slots=True)
class TokenOffsets:
    """Character offsets of each token of one text, in the embedder's own tokenizer."""

    starts: list[int]
    ends: list[int]


class EmbedderClient(TypedClient[embedder_pb2_grpc.EmbedderStub]):
    """The embedder, with its Info cached per connection."""

    service = "embedder"
    stub_cls = embedder_pb2_grpc.EmbedderStub

    def __init__(
        self, target: str, *, timeout_s: float = 30.0, connect_timeout_s: float = 3.0
    ) -> None:
        super().__init__(target, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s)
        self._info: EmbedderInfo | None = None

    def reconnected(self) -> None:
        self._info = None

    async def info(self) -> EmbedderInfo:
        if self._info is None:
            self.rpc.watch_connection()
            reply: embedder_pb2.EmbedderInfo = await self.rpc.call("Info", common_pb2.InfoRequest())
            self._info = EmbedderInfo(
                model=reply.service.model,
                dimension=reply.dimension,
                max_length=reply.max_length,
                query_prefix=reply.query_prefix,
                passage_prefix=reply.passage_prefix,
            )
        return self._info

    async def embed(
        self, texts: Sequence[str], input_type: InputType, *, timeout_s: float | None = None
    ) -> Embeddings:
        reply: embedder_pb2.EmbedResponse = await self.rpc.call(
            "Embed",
            embedder_pb2.EmbedRequest(texts=texts, input_type=_INPUT_TYPES[input_type]),
            timeout_s=timeout_s,
        )
        return Embeddings(
            [list(e.values) for e in reply.embeddings], reply.model, reply.total_tokens
        )

    async def embed_query(self, query: str, *, timeout_s: float | None = None) -> list[float]:
        return (await self.embed([query], "query", timeout_s=timeout_s)).vectors[0]

    async def tokenize(
        self, texts: Sequence[str], *, timeout_s: float | None = None
    ) -> list[TokenOffsets]:
        reply: embedder_pb2.TokenizeResponse = await self.rpc.call(
            "Tokenize", embedder_pb2.TokenizeRequest(texts=texts), timeout_s=timeout_s
        )
        return [TokenOffsets(list(t.starts), list(t.ends)) for t in reply.texts]
