"""Embedder gRPC servicer: validates requests, applies prefixes, batches forward passes."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np

from services.embedder.backends import load_backend
from services.embedder.backends.base import EmbeddingBackend
from services.embedder.settings import EmbedderSettings
from shared.batching import MicroBatcher
from shared.errors import InvalidArgument
from shared.proto.ragrail.v1 import common_pb2, embedder_pb2, embedder_pb2_grpc
from shared.server import BlockingRunner, Built, ServiceSpec
from shared.version import VERSION


class EmbedderServicer(embedder_pb2_grpc.EmbedderServicer):
    def __init__(self, backend: EmbeddingBackend, settings: EmbedderSettings) -> None:
        self.backend = backend
        self.settings = settings
        # One model, one forward pass at a time: two concurrent passes only fight for the cores.
        self._model_thread = BlockingRunner(1, "embed")
        self._batcher: MicroBatcher[str, np.ndarray] = MicroBatcher(
            self._embed_batch, max_items=settings.batch_size, wait_s=settings.coalesce_ms / 1000
        )

    async def _embed_batch(self, texts: list[str]) -> np.ndarray:
        return await self._model_thread(self.backend.embed, texts)

    def _validate(self, texts: list[str]) -> None:
        if not texts:
            raise InvalidArgument("texts is empty; send at least one text to embed")
        if len(texts) > self.settings.max_batch_texts:
            raise InvalidArgument(
                f"{len(texts)} texts in one request; the limit is {self.settings.max_batch_texts} "
                "(RAGRAIL_EMBEDDER_MAX_BATCH_TEXTS): split the request"
            )
        for i, text in enumerate(texts):
            if not text.strip():
                raise InvalidArgument(f"texts[{i}] is empty or whitespace; remove it")
            if len(text) > self.settings.max_text_chars:
                raise InvalidArgument(
                    f"texts[{i}] has {len(text)} characters; the limit is "
                    f"{self.settings.max_text_chars}: chunk it first"
                )

    async def Embed(
        self, request: embedder_pb2.EmbedRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.EmbedResponse:
        texts = list(request.texts)
        self._validate(texts)
        prefix = (
            self.settings.query_prefix
            if request.input_type == embedder_pb2.INPUT_TYPE_QUERY
            else self.settings.passage_prefix
        )
        if prefix:
            texts = [prefix + t for t in texts]
        if len(texts) >= self.settings.batch_size:
            # Already a full batch: sorting by length inside encode beats coalescing.
            vectors = await self._model_thread(self.backend.embed, texts)
        else:
            vectors = np.stack(await self._batcher.submit(texts))
        total_tokens = await self._model_thread(self.backend.count_tokens, texts)
        return embedder_pb2.EmbedResponse(
            embeddings=[embedder_pb2.Embedding(values=row) for row in vectors.tolist()],
            dimension=self.backend.dimension,
            model=self.backend.model_name,
            total_tokens=total_tokens,
        )

    async def Tokenize(
        self, request: embedder_pb2.TokenizeRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.TokenizeResponse:
        if len(request.texts) > self.settings.max_batch_texts:
            raise InvalidArgument(
                f"{len(request.texts)} texts in one request; the limit is "
                f"{self.settings.max_batch_texts}: split the request"
            )
        offsets = await self._model_thread(self.backend.tokenize, list(request.texts))
        return embedder_pb2.TokenizeResponse(
            texts=[
                embedder_pb2.TokenizedText(num_tokens=len(o.starts), starts=o.starts, ends=o.ends)
                for o in offsets
            ]
        )

    async def Info(
        self, request: common_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.EmbedderInfo:
        return embedder_pb2.EmbedderInfo(
            service=common_pb2.ServiceInfo(
                service="embedder",
                version=VERSION,
                backend=self.backend.name,
                model=self.backend.model_name,
                details={
                    "device": self.backend.device,
                    "batch_size": str(self.settings.batch_size),
                },
            ),
            dimension=self.backend.dimension,
            max_length=self.backend.max_length,
            normalized=self.backend.normalized,
            query_prefix=self.settings.query_prefix,
            passage_prefix=self.settings.passage_prefix,
        )

    async def close(self) -> None:
        await self._batcher.close()
        self._model_thread.shutdown()


async def build(settings: EmbedderSettings) -> Built:
    backend = await asyncio.to_thread(load_backend, settings)
    servicer = EmbedderServicer(backend, settings)
    return Built(
        specs=[
            ServiceSpec(
                embedder_pb2.DESCRIPTOR.services_by_name["Embedder"].full_name,
                servicer,
                embedder_pb2_grpc.add_EmbedderServicer_to_server,
            )
        ],
        close=servicer.close,
        ready_message={"model": backend.model_name, "dimension": backend.dimension},
    )
