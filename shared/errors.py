"""Domain errors, each mapped to one gRPC status and one HTTP status.

Service code raises these; the gRPC interceptor and the gateway's exception handlers turn
them into a status with the message as written here, so messages must be safe to show a
client and say what to do.
"""

from __future__ import annotations

from typing import Any

from grpc import StatusCode


class RagrailError(Exception):
    """Base class: a failure a client can understand and act on. A subclass names the statuses
    it maps to in its class line, `class X(RagrailError, grpc_code=..., http_status=...)`
    (or sets the attributes); one it leaves out is inherited."""

    grpc_code: StatusCode = StatusCode.INTERNAL
    http_status: int = 500

    def __init_subclass__(
        cls,
        *,
        grpc_code: StatusCode | None = None,
        http_status: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if grpc_code is not None:
            cls.grpc_code = grpc_code
        if http_status is not None:
            cls.http_status = http_status

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(RagrailError, grpc_code=StatusCode.INVALID_ARGUMENT, http_status=422): ...


class NotFound(RagrailError, grpc_code=StatusCode.NOT_FOUND, http_status=404): ...


class AlreadyExists(RagrailError, grpc_code=StatusCode.ALREADY_EXISTS, http_status=409): ...


class PermissionDenied(RagrailError, grpc_code=StatusCode.PERMISSION_DENIED, http_status=403):
    """The gateway's scope checks. Not in _BY_CODE: a peer's PERMISSION_DENIED (a service
    token that does not match) is the deployment's fault, not the client's."""


class FailedPrecondition(
    RagrailError, grpc_code=StatusCode.FAILED_PRECONDITION, http_status=409
): ...


class ResourceExhausted(RagrailError, grpc_code=StatusCode.RESOURCE_EXHAUSTED, http_status=429): ...


class Unavailable(RagrailError, grpc_code=StatusCode.UNAVAILABLE, http_status=503): ...


class DeadlineExceeded(RagrailError, grpc_code=StatusCode.DEADLINE_EXCEEDED, http_status=504): ...


_BY_CODE: dict[StatusCode, type[RagrailError]] = {
    cls.grpc_code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        ResourceExhausted,
        Unavailable,
        DeadlineExceeded,
    )
}


def from_grpc(code: StatusCode, message: str) -> RagrailError:
    """Rebuilds the domain error a peer service raised, so it keeps its meaning across hops."""
    return _BY_CODE.get(code, RagrailError)(message)
