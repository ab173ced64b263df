"""triton engine: the answer comes from a Triton Inference Server (TensorRT-LLM on GPUs in
production) over gRPC; this process only renders the chat template and counts tokens.

Each request is one `ModelStreamInfer` stream (tritonclient's asyncio client) to a decoupled
model, which sends a response per generation step; `triton_protocols.py` says what the
tensors mean for the `llmapi` and `ensemble` models. What the engine adds around that:

- Cancellation: when the servicer closes the iterator (client gone, deadline, stop string),
  the gRPC stream is cancelled, which Triton passes to the model as a cancelled request
  (TensorRT-LLM's llmapi model aborts its generation; it polls every 100 ms by default).
- Deadlines: the request's deadline (or `triton_max_request_s`) is the stream's timeout.
- Retries: a request Triton could not be reached for is tried again, with a doubling backoff
  within the deadline, but only while no response has come back: once text was streamed to
  the client, a failure ends the answer (a second attempt could not continue it).
- Token counts: each streamed piece is tokenized with the model's tokenizer (TensorRT-LLM
  streams whole tokens, so the pieces fall on token boundaries), which gives usage, time to
  first token and inter-token latency like the local engines.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import grpc
from tritonclient.grpc import InferResult
from tritonclient.grpc.aio import InferenceServerClient
from tritonclient.utils import InferenceServerException

from services.generator import metrics
from services.generator.backends.base import (
    Chunk,
    Engine,
    EngineInfo,
    FinishReason,
    GenerationRequest,
    Message,
)
from services.generator.backends.triton_protocols import PROTOCOLS, ModelSchema, StreamState
from services.generator.chat_template import load_chat_tokenizer
from services.generator.settings import GeneratorSettings
from shared.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    RagrailError,
    ResourceExhausted,
    Unavailable,
)

log = logging.getLogger(__name__)

FINAL = "triton_final_response"  # response parameter Triton sets on a stream's last response


class TritonEngine(Engine):
    name: ClassVar[str] = "triton"

    def __init__(self, settings: GeneratorSettings) -> None:
        self.settings = settings
        self.url = settings.triton_url
        self.protocol = PROTOCOLS[settings.triton_protocol]()
        self.model = settings.triton_model or self.protocol.default_model
        self.tokenizer = load_chat_tokenizer(settings.tokenizer)
        trained = self.tokenizer.context_length
        self.context_length = settings.context_length or trained
        if not self.context_length:
            raise FailedPrecondition(
                f"the tokenizer in {self.tokenizer.source} does not say the model's context "
                "length; set RAGRAIL_GENERATOR_CONTEXT_LENGTH to the served model's max_seq_len"
            )
        if trained and self.context_length > trained:
            raise FailedPrecondition(
                f"RAGRAIL_GENERATOR_CONTEXT_LENGTH={settings.context_length} exceeds the "
                f"{trained} tokens the model was trained on; use at most {trained}, or 0"
            )
        self._client: InferenceServerClient | None = None
        self._schema: ModelSchema | None = None
        self._schema_lock: asyncio.Lock | None = None
        self._running = 0

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        # The asyncio channel belongs to the service's event loop, so it is made here.
        self._client = InferenceServerClient(self.url)
        self._schema_lock = asyncio.Lock()
        try:
            schema = await self._load_schema(None)  # bounded by triton_timeout_s
        except RagrailError as exc:
            # The service starts anyway: Triton may come up later (or restart), and each
            # request says UNAVAILABLE until then.
            log.warning(
                "Triton model not usable yet", extra={"url": self.url, "error": exc.message}
            )
        else:
            log.info(
                "Triton model ready",
                extra={"url": self.url, "model": schema.name, "protocol": self.protocol.name},
            )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    def info(self) -> EngineInfo:
        details = {
            "triton_url": self.url,
            "triton_model": self.model,
            "triton_protocol": self.protocol.name,
            "tokenizer": self.tokenizer.source,
            "running": str(self._running),
            "waiting": "0",  # Triton queues; its own metrics say how long
        }
        if self._schema is not None:
            details["triton_inputs"] = ",".join(sorted(self._schema.inputs))
        return EngineInfo(
            engine=self.name,
            model=f"{self.model}@{self.url}",
            context_length=self.context_length,
            details=details,
        )

    def render_chat(self, messages: list[Message]) -> str:
        return self.tokenizer.render(messages)

    def tokenize(self, text: str, *, chat: bool) -> list[int]:
        return self.tokenizer.encode(text, chat=chat)

    # -- Triton calls ---------------------------------------------------------------------

    def _timeout(self, deadline: float | None, limit: float | None = None) -> float | None:
        """Seconds left before `deadline`, at most `limit`; DeadlineExceeded when none are."""
        if deadline is None:
            return limit
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(f"the deadline passed while reaching Triton at {self.url}")
        return left if limit is None else min(left, limit)

    async def _load_schema(self, deadline: float | None) -> ModelSchema:
        """The model's inputs, outputs and transaction policy, read once and kept (until a
        request finds them out of date)."""
        assert self._client is not None and self._schema_lock is not None
        async with self._schema_lock:
            if self._schema is not None:
                return self._schema
            timeout = self._timeout(deadline, self.settings.triton_timeout_s)
            try:
                metadata = await self._client.get_model_metadata(
                    self.model, as_json=True, client_timeout=timeout
                )
                config = await self._client.get_model_config(
                    self.model, as_json=True, client_timeout=timeout
                )
            except InferenceServerException as exc:
                error = self._error(exc.status(), exc.message())
                if isinstance(error, DeadlineExceeded) and (
                    deadline is None or time.monotonic() < deadline
                ):
                    # Our own limit, not the client's deadline: a host that does not answer.
                    error = Unavailable(
                        f"Triton at {self.url} did not answer within "
                        f"{self.settings.triton_timeout_s:g} s (RAGRAIL_GENERATOR_TRITON_TIMEOUT_S)"
                    )
                raise error from exc
            schema = ModelSchema.from_triton(metadata, config.get("config", config))
            self.protocol.check(schema)
            self._schema = schema
            return schema

    def _error(self, code: Any, details: str | None) -> RagrailError:
        """The error a client sees for a failed Triton call (`code`: a grpc.StatusCode or
        tritonclient's "StatusCode.X" string)."""
        name = code.name if isinstance(code, grpc.StatusCode) else str(code).split(".")[-1]
        said = " ".join((details or "").split())[:300]
        where = f"Triton at {self.url} (model '{self.model}')"
        if name == "UNAVAILABLE":
            return Unavailable(
                f"{where} is unreachable or not ready: {said}; check that Triton runs and "
                "RAGRAIL_GENERATOR_TRITON_URL points at its gRPC port"
            )
        if name == "DEADLINE_EXCEEDED":
            return DeadlineExceeded(f"the deadline passed while waiting for {where}")
        if name == "RESOURCE_EXHAUSTED":
            return ResourceExhausted(f"{where} is at capacity: {said}; retry after a short wait")
        if name in ("NOT_FOUND", "INVALID_ARGUMENT") and "unknown model" in said.lower():
            return FailedPrecondition(
                f"{where}: {said}; set RAGRAIL_GENERATOR_TRITON_MODEL to a model in its repository"
            )
        return RagrailError(f"{where} failed ({name}): {said}")

    def _request(self, request: GenerationRequest, schema: ModelSchema) -> dict[str, Any]:
        return {
            "model_name": self.model,
            "inputs": self.protocol.request_inputs(request, schema),
            "outputs": self.protocol.requested_outputs(schema),
            "request_id": request.request_id,
            # Without it Triton drops a decoupled model's flags-only last response, and the
            # end of the answer could not be told from a stalled stream.
            "parameters": {"triton_enable_empty_final_response": True},
        }

    async def _open(self, request: GenerationRequest, deadline: float | None) -> tuple[Any, Any]:
        """A stream with its first response, retrying while Triton cannot be reached."""
        assert self._client is not None
        attempt = 0
        while True:
            stream = None
            try:
                schema = await self._load_schema(deadline)
                stream = self._client.stream_infer(
                    _one(self._request(request, schema)),
                    stream_timeout=self._timeout(deadline),
                )
                first = await stream.__anext__()
                return stream, first
            except (grpc.aio.AioRpcError, InferenceServerException, StopAsyncIteration) as exc:
                error = self._call_error(exc)
                cause: BaseException = exc
            except Unavailable as exc:  # reading the metadata could not connect
                error, cause = exc, exc
            except BaseException:
                # Cancelled (client gone, deadline) while waiting for the first response: end
                # the request in Triton too, rather than when the call is garbage-collected.
                if stream is not None:
                    stream.cancel()
                raise
            if stream is not None:
                stream.cancel()
            if isinstance(error, FailedPrecondition | Unavailable):
                self._schema = None  # Triton may have restarted, or with another model
            wait = self.settings.triton_retry_backoff_s * 2**attempt
            if (
                not isinstance(error, Unavailable)
                or attempt >= self.settings.triton_retries
                or (deadline is not None and time.monotonic() + wait >= deadline)
            ):
                raise error from cause
            attempt += 1
            log.info(
                "Triton unreachable; retrying",
                extra={"attempt": attempt, "wait_s": wait, "request_id": request.request_id},
            )
            await asyncio.sleep(wait)

    def _call_error(self, exc: BaseException) -> RagrailError:
        if isinstance(exc, grpc.aio.AioRpcError):
            return self._error(exc.code(), exc.details())
        if isinstance(exc, InferenceServerException):
            return self._error(exc.status() or "UNKNOWN", exc.message())
        return RagrailError(f"Triton at {self.url} closed the stream before answering")

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        limit = self.settings.triton_max_request_s
        deadline = request.deadline
        if deadline is None and limit:
            deadline = time.monotonic() + limit
        self._running += 1
        metrics.RUNNING.labels(self.name).set(self._running)
        stream = None
        complete = False
        try:
            stream, (result, error) = await self._open(request, deadline)
            state = StreamState()
            generated = 0
            while True:
                if error is not None:
                    raise self._call_error(error)
                text, reason = self.protocol.read(result, state)
                tokens = len(self.tokenizer.encode(text, chat=False)) if text else 0
                generated += tokens
                if _is_final(result):
                    if reason is None:  # the ensemble does not say why it stopped
                        length = generated >= request.sampling.max_tokens
                        reason = FinishReason.LENGTH if length else FinishReason.STOP
                    complete = True  # the servicer closes the iterator at this chunk
                    yield Chunk(text, tokens, reason)
                    return
                if text:
                    yield Chunk(text, tokens)
                try:
                    result, error = await stream.__anext__()
                except StopAsyncIteration:
                    raise RagrailError(
                        f"Triton at {self.url} ended the stream before the answer's last response"
                    ) from None
                except (grpc.aio.AioRpcError, InferenceServerException) as exc:
                    # No retry here: text already went to the client.
                    raise self._call_error(exc) from exc
        except (GeneratorExit, asyncio.CancelledError):
            if not complete:  # the client went away, the deadline passed or a stop matched
                metrics.CANCELLED.labels(self.name).inc()
            raise
        finally:
            if stream is not None:
                # Cut short, Triton cancels the request and the model stops generating;
                # after the last response this only closes the stream.
                stream.cancel()
            self._running -= 1
            metrics.RUNNING.labels(self.name).set(self._running)


async def _one(body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The request side of the stream. It ends after the request (a half-close): Triton
    still sends every response the model makes for it, then ends the stream."""
    yield body


def _is_final(result: InferResult) -> bool:
    # A map of messages: reading a missing key would insert it, so test membership first.
    parameters = result.get_response().parameters
    return FINAL in parameters and bool(parameters[FINAL].bool_param)
