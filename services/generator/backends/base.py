"""The interface every generator engine implements, and the values that cross it.

The servicer (services/generator/server.py) owns everything that is the same for every
engine: request validation, the chat template call, stop sequences, time to first token and
inter-token latency, usage, metrics and gRPC errors. An engine owns the model: rendering a
chat with the model's template, tokenizing with the model's tokenizer, and streaming the
answer to one prompt. A call goes:

    prompt, ids = engine.prepare(messages)           # render_chat, then tokenize(chat=True):
                                                     # the ids count against context_length
    async with contextlib.aclosing(engine.generate(GenerationRequest(...))) as chunks:
        async for chunk in chunks: ...               # text deltas; the last has finish_reason

Rules an engine keeps (the servicer relies on them):
- `generate` yields `Chunk`s in order; `Chunk.tokens` counts the tokens behind each chunk
  (0 for a chunk that only carries a finish reason) and the last chunk, and only it, has a
  `finish_reason`. The end-of-sequence token is not text and is not counted.
- It stops after `sampling.max_tokens` tokens with LENGTH, or earlier with STOP at the
  model's end of sequence. Stop strings are cut by the servicer, which closes the iterator at
  the first match; an engine may also hand `sampling.stop` to a server that supports them.
- When the iterator is closed early (`aclose`: client gone, deadline, stop string), the work
  for that request stops within one decoding step and its resources are freed.
- Overload is `shared.errors.ResourceExhausted` raised from the first `__anext__`, with a
  message that says what is full; a model or server failure is another `RagrailError`
  (`Unavailable` for a remote engine that cannot be reached).
- `render_chat`, `tokenize` and `prepare` are blocking and thread-safe; the servicer calls
  them on a worker thread. `generate` must not block the event loop.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import ClassVar


class FinishReason(enum.Enum):
    STOP = "stop"  # end of sequence, or a stop string
    LENGTH = "length"  # max_tokens, or the context window, reached
    CANCELLED = "cancelled"  # the engine dropped the request (shutdown)


@dataclass(frozen=True)
class Message:
    role: str  # system, user or assistant
    content: str


@dataclass(frozen=True)
class Sampling:
    """Validated sampling parameters (services/generator/validation.py fills the defaults)."""

    temperature: float = 0.7  # 0: greedy
    top_p: float = 1.0  # 1: off
    top_k: int = 0  # 0: off
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int | None = None  # None: a fresh random seed per request
    repetition_penalty: float = 1.0  # 1: off

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class GenerationRequest:
    request_id: str
    prompt: str  # chat template applied: what a remote engine sends as its text input
    prompt_ids: tuple[int, ...]  # `prompt` tokenized by this engine: what a local one decodes
    sampling: Sampling
    deadline: float | None = None  # time.monotonic() after which the answer is useless
    # The chat as the client sent it, for an engine whose server applies the chat template
    # itself (openai with remote_chat_template=server); the other engines read `prompt`.
    messages: tuple[Message, ...] = ()


@dataclass(frozen=True)
class Chunk:
    text: str
    tokens: int = 0
    finish_reason: FinishReason | None = None


@dataclass
class EngineInfo:
    """What Info reports: `model` is the path or name loaded, `details` free-form facts."""

    engine: str
    model: str
    context_length: int
    details: dict[str, str] = field(default_factory=dict)


class Engine(ABC):
    name: ClassVar[str]

    @abstractmethod
    def info(self) -> EngineInfo:
        """Model, context window (prompt + answer tokens) and details such as the device."""

    @abstractmethod
    def render_chat(self, messages: list[Message]) -> str:
        """The prompt for `messages` with the model's chat template, ending with the opening
        of the assistant's turn (add_generation_prompt)."""

    @abstractmethod
    def tokenize(self, text: str, *, chat: bool) -> list[int]:
        """Token ids of `text` with the model's tokenizer. chat=True: `text` came from
        `render_chat`, so its special tokens are parsed and nothing is added that the template
        did not write; chat=False: plain text, no special tokens added (for budgeting)."""

    def prepare(self, messages: list[Message]) -> tuple[str, list[int]]:
        """The prompt for `messages` and its token ids, as counted against the context
        window. An engine whose server renders the chat itself overrides this to count the
        prompt the server will see."""
        prompt = self.render_chat(messages)
        return prompt, self.tokenize(prompt, chat=True)

    @abstractmethod
    def generate(self, request: GenerationRequest) -> AsyncIterator[Chunk]:
        """Streams the answer to `request.prompt` (an async generator)."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Called once on the event loop before the service opens its port."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Stops generating; pending requests end with CANCELLED."""
