"""Typed client of the guardrails service (CheckInput, CheckRetrieval, CheckOutput)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from shared.clients.base import TypedClient
from shared.errors import RagrailError
from shared.proto.ragrail.v1 import common_pb2, guardrails_pb2, guardrails_pb2_grpc
from shared.verdict import Verdict


@dataclass(frozen=True, slots=True)
class RailVerdict:
    verdict: Verdict
    rail: str  # the rail that decided
    reason: str
    modified_text: str  # the rewritten text when verdict is modify
    duration_ms: float

    @classmethod
    def of(cls, result: guardrails_pb2.RailResult) -> RailVerdict:
        return cls(
            verdict=Verdict.of_proto(result.verdict),  # an unknown one is a block
            rail=result.rail,
            reason=result.reason,
            modified_text=result.modified_text,
            duration_ms=result.duration_ms,
        )


def _messages(messages: Sequence[tuple[str, str]]) -> list[common_pb2.ChatMessage]:
    return [common_pb2.ChatMessage(role=role, content=text) for role, text in messages]


def _passages(passages: Sequence[tuple[str, str]]) -> list[common_pb2.TextPassage]:
    return [common_pb2.TextPassage(id=i, text=t) for i, t in passages]


class GuardrailsClient(TypedClient[guardrails_pb2_grpc.GuardrailsStub]):
    service = "guardrails"
    stub_cls = guardrails_pb2_grpc.GuardrailsStub
    # How long a pending-model answer holds: the service can load a model any time (SIGHUP).
    PENDING_TTL_S = 5.0
    _pending: tuple[float, str] | None = None

    async def guard_model_pending(self, *, timeout_s: float = 1.0) -> str:
        """Why the rails on the guard model allow everything (not trained yet), or "" when
        they run; from Info, looked up at most every PENDING_TTL_S. A failed lookup says "",
        and is remembered as long (the checks themselves then report the service's state; a
        service that is down must not cost every chat a lookup's timeout)."""
        now = time.monotonic()
        if self._pending is not None and now - self._pending[0] < self.PENDING_TTL_S:
            return self._pending[1]
        why = ""
        try:
            reply: guardrails_pb2.GuardrailsInfo = await self.rpc.call(
                "Info", common_pb2.InfoRequest(), timeout_s=timeout_s
            )
        except (grpc.RpcError, RagrailError):
            reply = None
        if reply is not None and reply.service.details.get("guard_model") == "pending":
            details = reply.service.details
            why = details.get("guard_model_status") or "the guard model is not trained yet"
        self._pending = (now, why)
        return why

    async def check_input(
        self, messages: Sequence[tuple[str, str]], *, timeout_s: float | None = None
    ) -> RailVerdict:
        """The input rails on a conversation ((role, content) messages)."""
        result = await self.rpc.call(
            "CheckInput",
            guardrails_pb2.CheckInputRequest(messages=_messages(messages)),
            timeout_s=timeout_s,
        )
        return RailVerdict.of(result)

    async def check_retrieval(
        self, query: str, chunks: Sequence[tuple[str, str]], *, timeout_s: float | None = None
    ) -> dict[str, RailVerdict]:
        """The retrieval rails on (id, text) chunks: the verdict of each chunk by id."""
        reply: guardrails_pb2.CheckRetrievalResponse = await self.rpc.call(
            "CheckRetrieval",
            guardrails_pb2.CheckRetrievalRequest(query=query, chunks=_passages(chunks)),
            timeout_s=timeout_s,
        )
        return {c.id: RailVerdict.of(c.result) for c in reply.chunks}

    async def check_output(
        self,
        messages: Sequence[tuple[str, str]],
        answer: str,
        context: Sequence[tuple[str, str]],
        *,
        grounded: bool = False,
        timeout_s: float | None = None,
    ) -> RailVerdict:
        """The output rails on an answer, with the (id, text) sources it was given. `grounded`:
        every sentence of the answer was found supported by those sources (the gateway's
        grounding), so the grounding rail does not score it again."""
        result = await self.rpc.call(
            "CheckOutput",
            guardrails_pb2.CheckOutputRequest(
                messages=_messages(messages),
                answer=answer,
                context=_passages(context),
                grounded=grounded,
            ),
            timeout_s=timeout_s,
        )
        return RailVerdict.of(result)
