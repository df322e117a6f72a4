"""The one interface every chat model satisfies (building one from Settings: :mod:`bara.llm.build`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from bara.llm.errors import MalformedResponse
from bara.messages import AssistantMessage, Message, ToolSpec, Usage

#: Normalised stop reasons (provider-specific ones pass through unchanged).
STOP_END = "end"
STOP_TOOL_CALLS = "tool_calls"
STOP_MAX_TOKENS = "max_tokens"


@dataclass(frozen=True)
class ModelResponse:
    """One model turn: the typed message plus what it cost and why it stopped."""

    message: AssistantMessage
    usage: Usage = Usage()
    stop_reason: str = STOP_END
    raw: Mapping[str, Any] | None = None  # the provider's decoded body, for traces
    attempts: int = 1  # HTTP attempts it took (1 = no retry)


def token_count(value: Any) -> int:
    """A provider's token count: a non-negative number (absent = 0); anything else is a malformed reply."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2 ** 53:
        raise MalformedResponse(f"token count {str(value)[:40]!r} is not a non-negative number")
    return int(value)


class Model(Protocol):
    """A chat model that may call tools. ``deadline`` is a ``time.monotonic()`` instant."""

    @property
    def name(self) -> str: ...

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *,
                 deadline: float | None = None) -> ModelResponse: ...
