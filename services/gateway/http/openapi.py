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

from services.gateway import schemas

_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}
_ERROR_JSON = {"application/json": {"schema": _ERROR_REF}}
# Declared by hand (routes' openapi_extra, the common errors), never as a parameter or
# response model FastAPI would see.
_EXTRA_MODELS = (schemas.DocumentsIngest, schemas.ErrorResponse)
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


def _add_models(document: dict[str, Any]) -> None:
    components = document.setdefault("components", {}).setdefault("schemas", {})
    for model in _EXTRA_MODELS:
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


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            _add_models(document)
            _fix_responses(document)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
