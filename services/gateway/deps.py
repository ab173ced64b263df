"""Objects the routes share, created by the app's lifespan and found on app.state."""

from __future__ import annotations

from fastapi import Request

from services.gateway.clients import Services
from services.gateway.ingest.pipeline import IngestPipeline
from services.gateway.rag.pipeline import ChatPipeline
from services.gateway.settings import GatewaySettings


def get_settings(request: Request) -> GatewaySettings:
    return request.app.state.settings


def get_services(request: Request) -> Services:
    return request.app.state.services


def get_pipeline(request: Request) -> IngestPipeline:
    return request.app.state.pipeline


def get_chat(request: Request) -> ChatPipeline:
    return request.app.state.chat
