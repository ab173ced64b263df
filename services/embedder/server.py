"""Embedder gRPC servicer: validates requests, applies prefixes, batches forward passes."""

from __future__ import annotations

from functools import partial
from typing import Any

import grpc
import numpy as np

from services.embedder.backends import load_backend
from services.embedder.settings import EmbedderSettings
from shared.batching import MicroBatcher
from shared.errors import InvalidArgument
from shared.models.encoder import Encoder, InputType
from shared.models.remote_encoder import RemoteEncoder
from shared.models.service import ModelServicer, build_model_service
from shared.proto.ragrail.v1 import common_pb2, embedder_pb2, embedder_pb2_grpc
from shared.server import Built


class EmbedderServicer(
    ModelServicer[Encoder, EmbedderSettings], embedder_pb2_grpc.EmbedderServicer
):
    proto = embedder_pb2
    add_to_server = embedder_pb2_grpc.add_EmbedderServicer_to_server

    def __init__(self, backend: Encoder, settings: EmbedderSettings) -> None:
        super().__init__(backend, settings)
        # One batcher per input type: a remote model may be told which it embeds (NIM's
        # input_type), so queries and passages never share a forward pass.
        self._batchers: dict[InputType, MicroBatcher[str, np.ndarray]] = {
            kind: MicroBatcher(
                partial(self._embed_batch, kind),
                max_items=settings.batch_size,
                wait_s=settings.coalesce_ms / 1000,
            )
            for kind in ("query", "passage")
        }

    async def _embed_batch(self, input_type: InputType, texts: list[str]) -> np.ndarray:
        return await self.run_in_parts(
            partial(self._embed_part, input_type), texts, self.backend.call_size
        )

    def _embed_part(self, kind: InputType, texts: list[str]) -> np.ndarray:
        return self.backend.embed_for(texts, kind)

    def _check_count(self, texts: object) -> None:
        count = len(texts)  # type: ignore[arg-type]
        if count > self.settings.max_batch_texts:
            raise InvalidArgument(
                f"{count} texts in one request; the limit is {self.settings.max_batch_texts}"
                f"{self.limit_setting('max_batch_texts')}: split the request"
            )

    async def Embed(
        self, request: embedder_pb2.EmbedRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.EmbedResponse:
        texts = list(request.texts)
        if not texts:
            raise InvalidArgument("texts is empty; send at least one text to embed")
        self._check_count(texts)
        self.check_texts(texts, "texts[{i}]")
        kind: InputType = (
            "query" if request.input_type == embedder_pb2.INPUT_TYPE_QUERY else "passage"
        )
        prefix = self.settings.query_prefix if kind == "query" else self.settings.passage_prefix
        if prefix:
            texts = [prefix + t for t in texts]
        if len(texts) >= self.settings.batch_size:
            # Already a full batch: sorting by length beats coalescing.
            vectors = await self._embed_batch(kind, texts)
        else:
            vectors = np.stack(await self._batchers[kind].submit(texts))
        total_tokens = await self.run(self.backend.count_tokens, texts)
        return embedder_pb2.EmbedResponse(
            embeddings=[embedder_pb2.Embedding(values=row) for row in vectors.tolist()],
            dimension=self.backend.dimension,
            model=self.backend.model_name,
            total_tokens=total_tokens,
        )

    async def Tokenize(
        self, request: embedder_pb2.TokenizeRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.TokenizeResponse:
        self._check_count(request.texts)
        offsets = await self.run(self.backend.tokenize, list(request.texts))
        return embedder_pb2.TokenizeResponse(
            texts=[
                embedder_pb2.TokenizedText(num_tokens=len(o.starts), starts=o.starts, ends=o.ends)
                for o in offsets
            ]
        )

    async def Info(
        self, request: common_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.EmbedderInfo:
        details = self.backend.details() if isinstance(self.backend, RemoteEncoder) else {}
        return embedder_pb2.EmbedderInfo(
            service=self.service_info(**details),
            dimension=self.backend.dimension,
            max_length=self.backend.max_length,
            normalized=self.backend.normalized,
            query_prefix=self.settings.query_prefix,
            passage_prefix=self.settings.passage_prefix,
        )

    def ready_message(self) -> dict[str, Any]:
        return {"model": self.backend.model_name, "dimension": self.backend.dimension}

    async def close(self) -> None:
        for batcher in self._batchers.values():
            await batcher.close()
        await super().close()
        self.backend.close()


async def build(settings: EmbedderSettings) -> Built:
    return await build_model_service(settings, load_backend, EmbedderServicer)
