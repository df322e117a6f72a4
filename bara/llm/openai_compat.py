"""OpenAI Chat Completions, for OpenAI itself and any compatible server (vLLM, Ollama, llama.cpp).

Wire shape of a tool round trip, which every compatible server expects:

* the assistant message carries ``tool_calls``: ``{"id", "type": "function",
  "function": {"name", "arguments": <JSON *string*>}}``, one per parallel call;
* it is followed directly by one ``{"role": "tool", "tool_call_id", "content"}``
  message per call, with nothing in between.

Only ``model``, ``messages`` and ``tools`` are sent by default: token-limit and
temperature parameters differ across OpenAI model families and compatible
servers, and a rejected parameter costs a whole turn. ``max_tokens`` is sent
when the model is built with one (``llm_send_max_tokens``): a local server
such as llama.cpp otherwise generates until its context is full.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from bara.llm.base import STOP_END, STOP_MAX_TOKENS, STOP_TOOL_CALLS, ModelResponse, token_count
from bara.llm.errors import MalformedResponse, malformed_guard
from bara.llm.http import Endpoint, loads_strict, post_json
from bara.messages import (AssistantMessage, Message, SystemMessage, ToolCall, ToolResultMessage, ToolSpec,
                               Usage, UserMessage, check_tool_pairing)

_STOPS = {"stop": STOP_END, "tool_calls": STOP_TOOL_CALLS, "function_call": STOP_TOOL_CALLS,
          "length": STOP_MAX_TOKENS}


def openai_payload(model: str, messages: Sequence[Message], tools: Sequence[ToolSpec] = (),
                   max_tokens: int | None = None) -> dict[str, Any]:
    """The exact request body for ``POST {base_url}/chat/completions``."""
    check_tool_pairing(messages)
    payload: dict[str, Any] = {"model": model, "messages": [wire_message(m) for m in messages]}
    if tools:
        payload["tools"] = [wire_tool(t) for t in tools]
    if max_tokens is not None:
        payload["max_tokens"] = max_tokens
    return payload


def wire_message(msg: Message) -> dict[str, Any]:
    if isinstance(msg, SystemMessage):
        return {"role": "system", "content": msg.text}
    if isinstance(msg, UserMessage):
        return {"role": "user", "content": msg.text}
    if isinstance(msg, ToolResultMessage):
        return {"role": "tool", "tool_call_id": msg.tool_call_id, "content": msg.content}
    return _wire_assistant(msg)


def _wire_assistant(msg: AssistantMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": msg.text or (None if msg.tool_calls else "")}
    if msg.tool_calls:
        out["tool_calls"] = [_wire_call(c) for c in msg.tool_calls]
    return out


def _wire_call(call: ToolCall) -> dict[str, Any]:
    args = call.raw_arguments if call.raw_arguments is not None else json.dumps(dict(call.arguments))
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": args}}


def wire_tool(spec: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": {"name": spec.name, "description": spec.description,
                                             "parameters": dict(spec.parameters)}}


def parse_openai_response(body: Mapping[str, Any]) -> ModelResponse:
    """Typed view of a Chat Completions response body."""
    try:
        choice = body["choices"][0]
        msg = choice["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise MalformedResponse(f"Chat Completions response has no choices[0].message ({exc!r}); check that "
                               "llm_base_url points at an OpenAI-compatible /v1 root") from exc
    with malformed_guard("Chat Completions response"):
        return _parse_choice(body, choice, msg)


def _parse_choice(body: Mapping[str, Any], choice: Mapping[str, Any], msg: Mapping[str, Any]) -> ModelResponse:
    raw_calls = msg.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise MalformedResponse(f"Chat Completions tool_calls is a {type(raw_calls).__name__}, not a list")
    calls = tuple(_parse_call(c, i) for i, c in enumerate(raw_calls))
    text = msg.get("content") or ""
    if not isinstance(text, (str, list)):
        raise MalformedResponse(f"Chat Completions message content is a {type(text).__name__}, not text")
    reason = choice.get("finish_reason") or (STOP_TOOL_CALLS if calls else STOP_END)
    usage = body.get("usage") or {}
    return ModelResponse(message=AssistantMessage(text=text if isinstance(text, str) else _join_parts(text),
                                                  tool_calls=calls),
                         usage=Usage(token_count(usage.get("prompt_tokens")), token_count(usage.get("completion_tokens"))),
                         stop_reason=_STOPS.get(reason, reason), raw=dict(body))



def _parse_call(call: Mapping[str, Any], index: int) -> ToolCall:
    fn = call.get("function") or {}
    raw = fn.get("arguments")
    call_id = call.get("id") or f"call_{index}"  # some local servers omit ids
    if not isinstance(fn.get("name"), str) or not isinstance(call_id, str):
        raise MalformedResponse("a Chat Completions tool call has no string name or id")
    if isinstance(raw, dict):  # older Ollama sends an object, not a string
        return ToolCall(id=call_id, name=fn.get("name", ""), arguments=raw)
    try:
        parsed = loads_strict(raw or "{}")  # NaN/Infinity: not JSON, reported to the model as such
    except (ValueError, TypeError, RecursionError):  # the tool runner reports bad arguments to the model
        parsed = None
    if isinstance(parsed, dict):
        return ToolCall(id=call_id, name=fn.get("name", ""), arguments=parsed)
    return ToolCall(id=call_id, name=fn.get("name", ""), raw_arguments=str(raw))


def _join_parts(parts: Any) -> str:
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict))


@dataclass(frozen=True)
class OpenAICompatModel:
    """A Chat Completions model behind ``endpoint`` (OpenAI or a compatible server)."""

    name: str
    endpoint: Endpoint
    max_tokens: int | None = None  # sent as max_tokens when set (llm_send_max_tokens)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *,
                 deadline: float | None = None) -> ModelResponse:
        payload = openai_payload(self.name, messages, tools, self.max_tokens)
        reply = post_json(self.endpoint, "chat/completions", payload, deadline)
        return replace(parse_openai_response(reply.body), attempts=reply.attempts)
