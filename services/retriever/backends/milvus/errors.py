"""Milvus's failures as ragrail's errors, and pymilvus's logging of them kept quiet.

pymilvus logs a traceback at ERROR for every failed call before raising it; the errors are
turned into domain errors here, so those records are dropped.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlparse

import grpc
from pymilvus.exceptions import ConnectionConfigException, ErrorCode, MilvusException

from services.retriever.backends.base import collection_exists, collection_not_found
from shared.errors import DeadlineExceeded, RagrailError, ResourceExhausted, Unavailable

log = logging.getLogger(__name__)

CREATING = "creating the collection"  # the action whose "already exists" is AlreadyExists
_CONNECT_CODES = {2, grpc.StatusCode.UNAVAILABLE}  # 2: pymilvus's "cannot connect"
_DEADLINE_CODES = {grpc.StatusCode.DEADLINE_EXCEEDED}


class _QuietRpcErrors(logging.Filter):
    """Drops pymilvus's traceback-per-failed-call records: the caller gets a domain error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.funcName != "_log_rpc_error"


class _NoRecoveryTracebacks(logging.Filter):
    """Keeps pymilvus's one-line "Connection recovery failed" warning, minus its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.funcName == "_recover":
            record.exc_info = None
            record.exc_text = None
        return True


logging.getLogger("pymilvus.decorators").addFilter(_QuietRpcErrors())
logging.getLogger("pymilvus.client.connection_manager").addFilter(_NoRecoveryTracebacks())


def display_uri(uri: str, is_lite: bool) -> str:
    """The uri without credentials, safe to log and show."""
    if is_lite:
        return uri
    parsed = urlparse(uri)
    if parsed.username or parsed.password:
        host = parsed.hostname or ""
        netloc = f"{host}:{parsed.port}" if parsed.port else host
        return parsed._replace(netloc=netloc).geturl()
    return uri


def connect_error(exc: MilvusException, uri: str, is_lite: bool) -> Unavailable:
    if is_lite:
        return Unavailable(
            f"cannot open Milvus Lite data at {uri} ({exc.message}); only one "
            "process can use it at a time: stop the other one, or run a Milvus server "
            "and set RAGRAIL_RETRIEVER_MILVUS_URI to it"
        )
    return Unavailable(
        f"cannot connect to Milvus at {display_uri(uri, is_lite)} ({exc.message}); check that "
        "it is running and that RAGRAIL_RETRIEVER_MILVUS_URI and the token are right"
    )


def domain_error(
    exc: MilvusException, action: str, collection: str | None, where: str, timeout_s: float
) -> RagrailError:
    """The error for the caller when `action` on Milvus at `where` failed with `exc`; a
    NotFound means the collection is gone."""
    message = exc.message or str(exc)
    lowered = message.lower()
    if collection is not None and _is_not_found(exc.code, lowered):
        return collection_not_found(collection)
    if action == CREATING and "already exist" in lowered:
        return collection_exists(str(collection))
    if exc.code == ErrorCode.RATE_LIMIT:
        return ResourceExhausted(f"Milvus is rate-limiting {action}; retry in a moment")
    # The code comes before the text: pymilvus reports a server that stayed down as
    # "Retry timeout" with code UNAVAILABLE.
    if isinstance(exc, ConnectionConfigException) or exc.code in _CONNECT_CODES:
        return unreachable(where, action, message)
    if exc.code in _DEADLINE_CODES or "timeout" in lowered or "deadline" in lowered:
        return DeadlineExceeded(
            f"Milvus at {where} did not finish {action} within "
            f"{timeout_s:g} s; retry, or raise RAGRAIL_RETRIEVER_MILVUS_TIMEOUT_S"
        )
    if "connect" in lowered or "unavailable" in lowered:
        return unreachable(where, action, message)
    log.warning("Milvus failed while %s: %s", action, message)
    return RagrailError(f"Milvus failed while {action}: {message}")


def unreachable(where: str, action: str, message: str) -> Unavailable:
    return Unavailable(
        f"cannot reach Milvus at {where} while {action} ({message}); check that it is running"
    )


def rpc_error(exc: grpc.RpcError, where: str, action: str) -> Unavailable:
    return Unavailable(
        f"Milvus at {where} failed while {action} ({exc.code().name}); check that it is running"
    )


def is_released(exc: MilvusException) -> bool:
    message = (exc.message or str(exc)).lower()
    return "released" in message or "not loaded" in message


def is_file_being_written(exc: MilvusException) -> bool:
    """Lite's answer to a load of a segment file it has not finished writing."""
    return "file is too small" in (exc.message or str(exc)).lower()


def _is_not_found(code: Any, lowered_message: str) -> bool:
    if code == ErrorCode.COLLECTION_NOT_FOUND:
        return True
    return "collection" in lowered_message and (
        "not exist" in lowered_message or "not found" in lowered_message
    )
