"""A Model wrapper that adds up what the provider reported: calls, prompt and completion tokens, time.

The gated pipeline's generator keeps only a reply's text; a benchmark or a test that wants the
server's own token counts (``usage`` of each reply) wraps the model once and reads the totals.
Not thread-safe: one meter per conversation runner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

from bara.llm.base import Model, ModelResponse
from bara.messages import Message, ToolSpec


@dataclass(frozen=True)
class Metered:
    """Totals since the meter was last reset."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    stops: tuple[str, ...] = ()

    def plus(self, reply: ModelResponse, seconds: float) -> Metered:
        return Metered(self.calls + 1, self.prompt_tokens + reply.usage.input_tokens,
                       self.completion_tokens + reply.usage.output_tokens, self.seconds + seconds,
                       (*self.stops, reply.stop_reason))


@dataclass
class MeteredModel:
    """``model`` itself, counting every reply's reported usage into ``totals``."""

    model: Model
    totals: Metered = field(default_factory=Metered)

    @property
    def name(self) -> str:
        return self.model.name

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *,
                 deadline: float | None = None) -> ModelResponse:
        start = time.perf_counter()
        reply = self.model.complete(messages, tools, deadline=deadline)
        self.totals = self.totals.plus(reply, time.perf_counter() - start)
        return reply

    def take(self) -> Metered:
        """The totals so far, and a fresh count from here."""
        out, self.totals = self.totals, Metered()
        return out
