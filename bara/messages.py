"""Provider-neutral, typed conversation records.

The adapters translate these to each provider's wire format and back, so the
agent loop never sees a provider dict. Two invariants are checked here because
both providers reject transcripts that break them, with errors that are hard
to trace back to the code that built the transcript:

* a :class:`ToolResultMessage` carries JSON text (the tool envelope), and
* every tool call of an assistant message is answered by exactly one result
  placed directly after it (:func:`check_tool_pairing`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, Union

from bara.errors import InputError


@dataclass(frozen=True)
class SystemMessage:
    text: str


@dataclass(frozen=True)
class UserMessage:
    text: str


@dataclass(frozen=True)
class ToolCall:
    """One tool invocation requested by the model.

    ``raw_arguments`` keeps the model's original argument string when it was not
    a JSON object; ``arguments`` is then empty and the tool runner reports the
    parse error back to the model instead of guessing.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None

    def __post_init__(self) -> None:
        if not self.id or not self.name:
            raise InputError(f"ToolCall needs a non-empty id and name (got id={self.id!r}, name={self.name!r})")


@dataclass(frozen=True)
class AssistantMessage:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))


@dataclass(frozen=True)
class ToolResultMessage:
    """A tool's envelope, answering the call with ``tool_call_id``."""

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False

    def __post_init__(self) -> None:
        try:
            json.loads(self.content)
        except (TypeError, ValueError) as exc:
            raise InputError(f"ToolResultMessage for {self.name!r} must carry JSON text; "
                             f"build it with json.dumps(result.envelope()) ({exc})") from exc


Message = Union[SystemMessage, UserMessage, AssistantMessage, ToolResultMessage]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ToolSpec:
    """What a model is told about a tool: name, when (not) to use it, JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


def check_tool_pairing(messages: Sequence[Message]) -> None:
    """Raise InputError unless each assistant tool call is answered right after it, once.

    Both providers require this; OpenAI additionally allows nothing between the
    assistant message and its ``tool`` messages.
    """
    pending: list[str] = []
    for i, msg in enumerate(messages):
        if isinstance(msg, ToolResultMessage):
            _consume_result(pending, msg, i)
            continue
        _require_answered(pending, i)
        if isinstance(msg, AssistantMessage):
            pending = [c.id for c in msg.tool_calls]
    _require_answered(pending, len(messages))


def _consume_result(pending: list[str], msg: ToolResultMessage, index: int) -> None:
    if msg.tool_call_id not in pending:
        raise InputError(f"message {index}: tool result for unknown or already answered call "
                         f"{msg.tool_call_id!r}; each result must follow the assistant message that made the call")
    pending.remove(msg.tool_call_id)


def _require_answered(pending: Sequence[str], index: int) -> None:
    if pending:
        raise InputError(f"message {index}: tool call(s) {', '.join(pending)} have no ToolResultMessage; "
                         "append one result per call directly after the assistant message")


def message_to_dict(msg: Message) -> dict[str, Any]:
    """A JSON-friendly view of a message for traces and logs (not a wire format)."""
    if isinstance(msg, AssistantMessage):
        return {"role": "assistant", "text": msg.text, "tool_calls": [_call_dict(c) for c in msg.tool_calls]}
    if isinstance(msg, ToolResultMessage):
        return {"role": "tool", "tool_call_id": msg.tool_call_id, "name": msg.name,
                "content": msg.content, "is_error": msg.is_error}
    role = "system" if isinstance(msg, SystemMessage) else "user"
    return {"role": role, "text": msg.text}


def _call_dict(call: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": dict(call.arguments)}
    if call.raw_arguments is not None:
        out["raw_arguments"] = call.raw_arguments
    return out
