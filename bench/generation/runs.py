"""What the generation benchmark measures: one answer (Run), a path's answers (PathResult) and
a wave of concurrent clients (Level)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class Run:
    """One answer: seconds to the first token and in all, tokens, text."""

    ttft: float
    total: float
    tokens: int
    text: str
    prompt_tokens: int = 0


@dataclass
class PathResult:
    label: str
    runs: list[Run] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return sum(r.tokens for r in self.runs) / sum(r.total for r in self.runs)

    @property
    def decode_per_s(self) -> float:
        """Tokens after the first over the time after the first: the decoding rate alone."""
        tokens = sum(max(r.tokens - 1, 0) for r in self.runs)
        return tokens / sum(r.total - r.ttft for r in self.runs)

    @property
    def ttft_ms(self) -> float:
        return statistics.median(r.ttft for r in self.runs) * 1000

    @property
    def prefill_per_s(self) -> float:
        """Prompt tokens over the time to the first token: the rate of forward passes that
        carry many tokens, which bounds what batching can reach on this hardware."""
        return sum(r.prompt_tokens for r in self.runs) / sum(r.ttft for r in self.runs)


@dataclass
class Level:
    """Requests sent `clients` at a time: every answer, and the wall time of each wave."""

    runs: list[Run] = field(default_factory=list)
    wall: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return sum(r.tokens for r in self.runs) / self.wall

    @property
    def p50_ms(self) -> float:
        return statistics.median(r.total for r in self.runs) * 1000

    @property
    def ttft_ms(self) -> float:
        return statistics.median(r.ttft for r in self.runs) * 1000
