"""Every failure the gateway returns, rendered as {"error": {"message", "type", "code"}}."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from shared.errors import RagrailError

log = logging.getLogger("ragrail.gateway")


class ErrorBody(BaseModel):
    message: str
    type: str
    code: int


class ErrorResponse(BaseModel):
    error: ErrorBody


def error_responses(statuses: Iterable[int] | Mapping[int, str]) -> dict[int | str, Any]:
    """An endpoint's `responses=`: each status answered with an ErrorResponse, described where
    `statuses` maps it to a description."""
    described = statuses if isinstance(statuses, Mapping) else dict.fromkeys(statuses, "")
    return {
        status: {"model": ErrorResponse, "description": text} if text else {"model": ErrorResponse}
        for status, text in described.items()
    }


class PayloadTooLarge(RagrailError):
    http_status = 413


def error_response(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(
        status_code=status, content={"error": {"message": message, "type": kind, "code": status}}
    )


def _describe(error: dict) -> str:
    where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
    # pydantic prefixes a validator's own message with "Value error, ": noise to a client.
    msg = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RagrailError)
    async def ragrail_error(request: Request, exc: RagrailError) -> JSONResponse:
        if exc.http_status >= 500:
            log.warning("request failed", extra={"path": request.url.path, "error": exc.message})
        return error_response(exc.http_status, exc.message, type(exc).__name__)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        message = "; ".join(_describe(e) for e in exc.errors()[:10])
        return error_response(422, f"invalid request: {message}", "InvalidArgument")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail), "HTTPError")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        rid = uuid.uuid4().hex[:16]
        log.exception("unhandled error", extra={"path": request.url.path, "request_id": rid})
        return error_response(
            500, f"internal error (request id {rid}); the gateway log has the details", "Internal"
        )
