"""The gateway's OpenAPI document, made to say what the gateway does.

FastAPI's generated document had two faults a schema-driven client trips over:
- the ingest routes read their body themselves (multipart or JSON) and reference the JSON
  body's schema by hand, `#/components/schemas/DocumentsIngest`, which FastAPI never
  generated, as no route declares that model as a parameter;
- every 422 was documented as FastAPI's `HTTPValidationError` (`{"detail": [...]}`), while
  the gateway answers every error as `{"error": {"message", "type", "code"}}`.
Here the missing schemas are added, every error status points at `ErrorResponse`, and the
error answers any route can give (401, 403, 413, 421, 429, 5xx) are documented once for all.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from services.gateway.http.errors import ErrorResponse

_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}
_ERROR_JSON = {"application/json": {"schema": _ERROR_REF}}
_COMMON_ERRORS = {
    "4XX": "A client error: the message says what to change. Besides each route's own: 401 "
    "(API key missing or unknown), 403 (a cross-origin request), 413 (body too large), 421 "
    "(a host name this gateway does not answer to), 429 (rate limit).",
    "5XX": "A service is unavailable (503), too slow (504), or failed (500).",
}
_STREAM = {
    "text/event-stream": {
        "schema": {
            "type": "string",
            "description": "With stream: true, server-sent events: chat.completion.chunk "
            "objects, then `data: [DONE]`.",
        }
    }
}


def _add_models(document: dict[str, Any], models: tuple[type[BaseModel], ...]) -> None:
    components = document.setdefault("components", {}).setdefault("schemas", {})
    for model in models:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in schema.pop("$defs", {}).items():
            components.setdefault(name, definition)
        components.setdefault(model.__name__, schema)
    # The error shape FastAPI would have used: nothing answers with it.
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)


def _fix_responses(document: dict[str, Any]) -> None:
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for status, response in responses.items():
                if status[0] in "45":
                    response["content"] = _ERROR_JSON
                    if status == "422":
                        response["description"] = (
                            "Invalid request: the message names each field at fault."
                        )
            for status, description in _COMMON_ERRORS.items():
                responses.setdefault(status, {"description": description, "content": _ERROR_JSON})
            if path == "/v1/chat/completions" and method == "post":
                responses["200"].setdefault("content", {}).update(_STREAM)


def install_openapi(app: FastAPI, extra_models: tuple[type[BaseModel], ...] = ()) -> None:
    """`extra_models`: bodies the routes declare by hand (openapi_extra), never as a parameter
    or response model FastAPI would see; ErrorResponse (the common errors) is always added."""
    models = (*extra_models, ErrorResponse)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            _add_models(document, models)
            _fix_responses(document)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
