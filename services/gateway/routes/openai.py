"""OpenAI-compatible endpoints: /v1/chat/completions (grounded in a collection when one is
named, streamed as server-sent events on request), /v1/embeddings and /v1/models. Existing
OpenAI clients work unchanged; ragrail's options travel as extra body fields."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from services.gateway import openai_schemas as oai
from services.gateway.clients import Services
from services.gateway.deps import get_chat, get_services
from services.gateway.rag.protocol import model_id
from services.gateway.rag.serving import ChatServing

log = logging.getLogger("ragrail.gateway")
router = APIRouter(prefix="/v1", tags=["openai"])


@router.post("/chat/completions", response_model=oai.ChatCompletion)
async def chat_completions(
    body: oai.ChatCompletionRequest, request: Request, chat: ChatServing = Depends(get_chat)
) -> oai.ChatCompletion | StreamingResponse:
    """Answers the conversation's last user message: grounded in `collection` /
    `collection_names` with numbered citations when a knowledge base is named, through the
    input, retrieval and output rails when a guardrails service is configured."""
    prepared = await chat.prepare(body)
    if not body.stream:
        return await chat.complete(prepared)
    events = chat.stream(prepared)
    first = await anext(events)  # errors before the first event are still HTTP errors

    async def sse() -> AsyncIterator[str]:
        try:
            yield first
            async for event in events:
                yield event
        # A client that goes away cancels this task (CancelledError is not an Exception), and
        # closing `events` cancels the generator call.
        except Exception as exc:  # once streaming, a failure can only be reported in-stream
            message = getattr(exc, "message", None)
            if message is None:
                log.exception("chat stream failed", extra={"id": prepared.id})
                message = "internal error; see the gateway log"
            error = {"error": {"message": message, "type": type(exc).__name__}}
            yield f"data: {json.dumps(error)}\n\n"
        finally:
            await events.aclose()

    return StreamingResponse(
        sse(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.post("/embeddings")
async def embeddings(
    body: oai.EmbeddingsRequest, services: Services = Depends(get_services)
) -> dict:
    """Embeds texts with the embedder service; `input_type` picks the query or passage prefix."""
    texts = [body.input] if isinstance(body.input, str) else body.input
    reply = await services.embedder.embed(texts, body.input_type)
    data = []
    for i, values in enumerate(reply.vectors):
        if body.encoding_format == "base64":  # what the openai client asks for by default
            encoded: list[float] | str = base64.b64encode(
                np.asarray(values, dtype="<f4").tobytes()
            ).decode()
        else:
            encoded = values
        data.append({"object": "embedding", "index": i, "embedding": encoded})
    return {
        "object": "list",
        "data": data,
        "model": reply.model,
        "usage": {"prompt_tokens": reply.total_tokens, "total_tokens": reply.total_tokens},
    }


@router.get("/models", response_model=oai.ModelList)
async def models(services: Services = Depends(get_services)) -> oai.ModelList:
    """The chat model (generator) and the embedding model (embedder)."""
    generator, embedder = await asyncio.gather(services.generator.info(), services.embedder.info())
    return oai.ModelList(
        data=[
            oai.ModelCard(id=model_id(generator), service="generator"),
            oai.ModelCard(id=embedder.model, service="embedder"),
        ]
    )
