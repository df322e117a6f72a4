"""A Model that replays queued replies and records every call: for tests and offline demos.

Each queued reply is one of:

* an :class:`AssistantMessage` or a plain ``str`` (an answer with no tool calls);
* a :class:`ModelResponse` (to script usage or a stop reason);
* an ``Exception`` instance, raised from ``complete`` (to script provider failures);
* a callable ``(messages, tools) -> any of the above``, to answer from what the
  model was actually shown (e.g. echo a tool result back).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence, Union

from bara.llm.base import STOP_END, STOP_TOOL_CALLS, ModelResponse
from bara.llm.errors import ScriptExhaustedError
from bara.messages import AssistantMessage, Message, ToolSpec

Reply = Union[AssistantMessage, ModelResponse, str, BaseException,
              Callable[[tuple[Message, ...], tuple[ToolSpec, ...]], object]]


@dataclass(frozen=True)
class ModelCall:
    """What the model was shown on one call."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    deadline: float | None

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)


class ScriptedModel:
    """Replays ``replies`` in order; ``calls`` records every ``complete`` call."""

    def __init__(self, replies: Iterable[Reply] = (), name: str = "scripted") -> None:
        self.name = name
        self._queue: deque[Reply] = deque(replies)
        self._calls: list[ModelCall] = []
        self._lock = threading.Lock()

    @property
    def calls(self) -> tuple[ModelCall, ...]:
        return tuple(self._calls)

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def queue(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *,
                 deadline: float | None = None) -> ModelResponse:
        call = ModelCall(tuple(messages), tuple(tools), deadline)
        with self._lock:
            self._calls.append(call)
            if not self._queue:
                raise ScriptExhaustedError(f"ScriptedModel {self.name!r} has no reply left for call "
                                           f"{len(self._calls)}; queue more replies in the test")
            reply = self._queue.popleft()
        return _as_response(reply(call.messages, call.tools) if callable(reply) else reply)


def _as_response(reply: object) -> ModelResponse:
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, ModelResponse):
        return reply
    if isinstance(reply, str):
        reply = AssistantMessage(text=reply)
    if not isinstance(reply, AssistantMessage):
        raise TypeError(f"ScriptedModel reply must be AssistantMessage, ModelResponse, str or Exception, "
                        f"not {type(reply).__name__}; fix the scripted reply")
    return ModelResponse(message=reply, stop_reason=STOP_TOOL_CALLS if reply.tool_calls else STOP_END)
