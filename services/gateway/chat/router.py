"""OpenAI-compatible endpoints: /v1/chat/completions (grounded in a collection when one is
named, streamed as server-sent events on request), /v1/embeddings and /v1/models. Existing
OpenAI clients work unchanged; ragrail's options travel as extra body fields."""

from __future__ import annotations

import asyncio
import base64

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from services.gateway.chat import protocol as oai
from services.gateway.chat.serving import ChatServing
from services.gateway.chat.state import model_id
from services.gateway.http.access import authorize, document_filter
from services.gateway.http.clients import Services
from services.gateway.http.deps import get_services
from services.gateway.http.principals import Action

router = APIRouter(prefix="/v1", tags=["openai"])


async def get_chat(request: Request) -> ChatServing:
    # `async def`: FastAPI runs a plain `def` dependency in its thread pool (http/deps.py).
    return request.app.state.chat


@router.post("/chat/completions", response_model=oai.ChatCompletion)
async def chat_completions(
    body: oai.ChatCompletionRequest, request: Request, chat: ChatServing = Depends(get_chat)
) -> oai.ChatCompletion | StreamingResponse:
    """Answers the conversation's last user message: grounded in `collection` /
    `collection_names` with numbered citations when a knowledge base is named, through the
    input, retrieval and output rails when a guardrails service is configured."""
    principal = None
    for name in body.collections:
        principal = authorize(request, Action.read, name)
    if principal is not None:
        # Retrieval sees only what the key may: no other chunk can reach the prompt, the
        # sources or the citations.
        body.filter = document_filter(principal, body.filter)

    return await chat.respond(body, request)


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
