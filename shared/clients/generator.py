"""Typed client of the generator service (Generate, GenerateStream, CountTokens, Info)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import grpc

from shared.clients.base import Metadata, TypedClient
from shared.proto.ragrail.v1 import common_pb2, generator_pb2, generator_pb2_grpc

# (role, content) of one chat message; a NamedTuple such as the gateway's Turn fits.
Message = tuple[str, str]

FINISH_REASONS = {
    generator_pb2.FINISH_REASON_STOP: "stop",
    generator_pb2.FINISH_REASON_LENGTH: "length",
    generator_pb2.FINISH_REASON_CANCELLED: "stop",
}


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling parameters; None leaves one to the generator's default. max_tokens None means
    the generator's default_max_tokens (the gateway always sends its own)."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    repetition_penalty: float | None = None

    def to_proto(self) -> generator_pb2.SamplingParams:
        # Field for field: the message's fields have these names (None leaves one unset).
        return generator_pb2.SamplingParams(**dataclasses.asdict(self))


@dataclass(frozen=True, slots=True)
class GeneratorInfo:
    model: str  # as the service names it: a file, directory or registry path
    backend: str
    context_length: int  # prompt and answer together, in tokens
    max_output_tokens: int


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class GenerateResult:
    text: str
    finish_reason: str  # OpenAI's names: stop or length
    usage: Usage
    time_to_first_token_ms: float
    model: str


@dataclass(frozen=True, slots=True)
class StreamChunk:
    delta: str
    # Set on the last chunk only: why it ended and what it cost.
    finish_reason: str | None = None
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class TokenCounts:
    prompt_tokens: int  # the messages as one prompt, chat template included
    text_tokens: list[int]  # each text on its own
    context_length: int  # the model's, as of this call


def _messages(messages: Sequence[Message]) -> list[common_pb2.ChatMessage]:
    return [common_pb2.ChatMessage(role=role, content=text) for role, text in messages]


class GeneratorClient(TypedClient[generator_pb2_grpc.GeneratorStub]):
    """The generator, with its Info cached per connection: asked again after a reconnect or
    while the channel is not connected, when a CountTokens reply shows another context
    length, and at least every
    `info_max_age_s` (a SIGHUP reload may swap the model and keep the context length, and the
    gateway's answer mode follows the model)."""

    service = "generator"
    stub_cls = generator_pb2_grpc.GeneratorStub

    def __init__(
        self,
        target: str,
        *,
        timeout_s: float = 120.0,
        info_timeout_s: float = 30.0,
        connect_timeout_s: float = 3.0,
        info_max_age_s: float = 10.0,
    ) -> None:
        super().__init__(target, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s)
        self.info_timeout_s = info_timeout_s
        self.info_max_age_s = info_max_age_s
        self._info: GeneratorInfo | None = None
        self._info_at = 0.0

    def reconnected(self) -> None:
        self._info = None

    async def info(self) -> GeneratorInfo:
        if self._info is not None and (
            time.monotonic() - self._info_at > self.info_max_age_s
            # Not connected now: the peer went away, and whoever answers next may serve
            # another model (the reconnect watcher would notice only after this call).
            or self.rpc.channel.get_state() != grpc.ChannelConnectivity.READY
        ):
            self._info = None
        if self._info is None:
            self.rpc.watch_connection()
            reply: generator_pb2.GeneratorInfo = await self.rpc.call(
                "Info", common_pb2.InfoRequest(), timeout_s=self.info_timeout_s
            )
            self._info = GeneratorInfo(
                model=reply.service.model,
                backend=reply.service.backend,
                context_length=reply.context_length,
                max_output_tokens=reply.max_output_tokens,
            )
            self._info_at = time.monotonic()
        return self._info

    async def count_tokens(
        self,
        messages: Sequence[Message] = (),
        texts: Sequence[str] = (),
        *,
        timeout_s: float | None = None,
    ) -> TokenCounts:
        """Tokens of `messages` as one prompt (the model's chat template applied) and of each
        text alone, in one call."""
        reply: generator_pb2.CountTokensResponse = await self.rpc.call(
            "CountTokens",
            generator_pb2.CountTokensRequest(messages=_messages(messages), texts=texts),
            timeout_s=timeout_s,
        )
        if self._info is not None and reply.context_length != self._info.context_length:
            self._info = None  # another model since Info was asked: ask again next time
        return TokenCounts(reply.prompt_tokens, list(reply.text_tokens), reply.context_length)

    @staticmethod
    def _request(
        messages: Sequence[Message], sampling: Sampling, request_id: str
    ) -> generator_pb2.GenerateRequest:
        return generator_pb2.GenerateRequest(
            messages=_messages(messages), sampling=sampling.to_proto(), request_id=request_id
        )

    async def generate(
        self,
        messages: Sequence[Message],
        sampling: Sampling,
        *,
        request_id: str = "",
        timeout_s: float | None = None,
    ) -> GenerateResult:
        reply: generator_pb2.GenerateResponse = await self.rpc.call(
            "Generate", self._request(messages, sampling, request_id), timeout_s=timeout_s
        )
        return GenerateResult(
            text=reply.text,
            finish_reason=FINISH_REASONS.get(reply.finish_reason, "stop"),
            usage=Usage(reply.usage.prompt_tokens, reply.usage.completion_tokens),
            time_to_first_token_ms=reply.timing.time_to_first_token_ms,
            model=reply.model,
        )

    async def stream(
        self,
        messages: Sequence[Message],
        sampling: Sampling,
        *,
        request_id: str = "",
        timeout_s: float | None = None,
        metadata: Metadata = (),
    ) -> AsyncIterator[StreamChunk]:
        """The answer as it is generated; closing the iterator cancels the call."""
        chunks = self.rpc.stream(
            "GenerateStream",
            self._request(messages, sampling, request_id),
            timeout_s=timeout_s,
            metadata=metadata,
        )
        try:
            async for chunk in chunks:
                if chunk.HasField("usage"):
                    yield StreamChunk(
                        chunk.delta,
                        FINISH_REASONS.get(chunk.finish_reason, "stop"),
                        Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens),
                    )
                else:
                    yield StreamChunk(chunk.delta)
        finally:
            await chunks.aclose()
