"""Request checks: every rule broken is INVALID_ARGUMENT with the field named and the range."""

from __future__ import annotations

import math
from collections.abc import Iterable

from services.generator.backends.base import Message, Sampling
from services.generator.settings import GeneratorSettings
from shared.errors import InvalidArgument
from shared.proto.ragrail.v1 import common_pb2, generator_pb2

ROLES = ("system", "user", "assistant")
MAX_STOP_SEQUENCES = 16
MAX_STOP_CHARS = 200
# Defaults of fields a request leaves unset (`optional` in generator.proto).
DEFAULTS = Sampling()


def messages_of(
    messages: Iterable[common_pb2.ChatMessage], settings: GeneratorSettings, *, field: str
) -> list[Message]:
    items = list(messages)
    if not items:
        raise InvalidArgument(f"{field} is empty; send at least one chat message")
    if len(items) > settings.max_messages:
        raise InvalidArgument(
            f"{field} has {len(items)} messages; the limit is {settings.max_messages} "
            "(RAGRAIL_GENERATOR_MAX_MESSAGES)"
        )
    total = 0
    out = []
    for i, message in enumerate(items):
        if message.role not in ROLES:
            raise InvalidArgument(
                f"{field}[{i}].role is '{message.role}'; use one of {', '.join(ROLES)}"
            )
        total += len(message.content)
        out.append(Message(message.role, message.content))
    if total > settings.max_prompt_chars:
        raise InvalidArgument(
            f"{field} hold {total} characters; the limit is {settings.max_prompt_chars} "
            "(RAGRAIL_GENERATOR_MAX_PROMPT_CHARS)"
        )
    return out


def _float(params: generator_pb2.SamplingParams, name: str, default: float) -> float:
    if not params.HasField(name):
        return default
    value = float(getattr(params, name))
    if not math.isfinite(value):
        raise InvalidArgument(f"sampling.{name} is {value}; send a finite number")
    return value


def sampling_of(params: generator_pb2.SamplingParams, settings: GeneratorSettings) -> Sampling:
    """Sampling with defaults filled; max_tokens is checked against the context window later,
    once the prompt is tokenized (`fit_max_tokens`)."""
    temperature = _float(params, "temperature", DEFAULTS.temperature)
    if not 0.0 <= temperature <= 2.0:
        raise InvalidArgument(
            f"sampling.temperature is {temperature:g}; use 0 (greedy) to 2 inclusive"
        )
    top_p = _float(params, "top_p", DEFAULTS.top_p)
    if not 0.0 < top_p <= 1.0:
        raise InvalidArgument(f"sampling.top_p is {top_p:g}; use more than 0, up to 1")
    top_k = params.top_k if params.HasField("top_k") else DEFAULTS.top_k
    if top_k < 0:
        raise InvalidArgument(f"sampling.top_k is {top_k}; use 0 (off) or a positive number")
    penalty = _float(params, "repetition_penalty", DEFAULTS.repetition_penalty)
    if not 0.0 < penalty <= 2.0:
        raise InvalidArgument(
            f"sampling.repetition_penalty is {penalty:g}; use more than 0, up to 2 (1 is off)"
        )
    max_tokens = params.max_tokens if params.HasField("max_tokens") else 0
    if params.HasField("max_tokens") and not 1 <= max_tokens <= settings.max_output_tokens:
        raise InvalidArgument(
            f"sampling.max_tokens is {max_tokens}; use 1 to {settings.max_output_tokens} "
            "(RAGRAIL_GENERATOR_MAX_OUTPUT_TOKENS)"
        )
    stop = tuple(params.stop)
    if len(stop) > MAX_STOP_SEQUENCES:
        raise InvalidArgument(
            f"sampling.stop has {len(stop)} sequences; the limit is {MAX_STOP_SEQUENCES}"
        )
    for i, s in enumerate(stop):
        if not s:
            raise InvalidArgument(f"sampling.stop[{i}] is empty; remove it")
        if len(s) > MAX_STOP_CHARS:
            raise InvalidArgument(
                f"sampling.stop[{i}] has {len(s)} characters; the limit is {MAX_STOP_CHARS}"
            )
    return Sampling(
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        max_tokens=max_tokens,  # 0 until fit_max_tokens
        stop=stop,
        seed=params.seed if params.HasField("seed") else None,
        repetition_penalty=penalty,
    )


def fit_max_tokens(
    sampling: Sampling, prompt_tokens: int, context_length: int, settings: GeneratorSettings
) -> int:
    """The answer's token limit: the request's, which must fit beside the prompt, or the
    default cut to the room the prompt leaves."""
    room = context_length - prompt_tokens
    if room < 1:
        raise InvalidArgument(
            f"messages make a prompt of {prompt_tokens} tokens; the context window is "
            f"{context_length} tokens, prompt and answer together: shorten the messages "
            "(CountTokens measures them)"
        )
    if sampling.max_tokens:
        if sampling.max_tokens > room:
            raise InvalidArgument(
                f"sampling.max_tokens is {sampling.max_tokens} but the prompt takes "
                f"{prompt_tokens} of the {context_length}-token context window, leaving {room}; "
                "ask for fewer tokens or shorten the messages"
            )
        return sampling.max_tokens
    return min(settings.default_max_tokens, room)
