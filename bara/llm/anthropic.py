"""Anthropic Messages API.

Wire shape of a tool round trip:

* the system prompt is the top-level ``system`` field, never a message;
* the assistant turn holds its text block (if any) and one ``tool_use`` block
  per call (``{"type": "tool_use", "id", "name", "input": {...}}``);
* the next turn is ONE user turn whose content starts with every
  ``tool_result`` block (``is_error`` true for failed tools) before any text;
* a request whose history holds tool blocks must define tools, so a call made
  with no tools offered (the agent's wrap-up) declares stubs of the tools used
  so far with ``tool_choice: {"type": "none"}``: defined, but not callable.

Adjacent same-role turns are merged, which is what turns a run of
ToolResultMessages (plus an optional follow-up UserMessage) into that single
user turn. Empty text blocks are dropped because the API rejects them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from bara.llm.base import STOP_END, STOP_MAX_TOKENS, STOP_TOOL_CALLS, ModelResponse, token_count
from bara.llm.errors import MalformedResponse, malformed_guard
from bara.llm.http import Endpoint, post_json
from bara.messages import (AssistantMessage, Message, SystemMessage, ToolCall, ToolResultMessage, ToolSpec,
                               Usage, UserMessage, check_tool_pairing)

_STOPS = {"end_turn": STOP_END, "stop_sequence": STOP_END, "tool_use": STOP_TOOL_CALLS,
          "max_tokens": STOP_MAX_TOKENS}


def anthropic_payload(model: str, messages: Sequence[Message], tools: Sequence[ToolSpec] = (),
                      max_tokens: int = 1024) -> dict[str, Any]:
    """The exact request body for ``POST {base_url}/v1/messages``."""
    check_tool_pairing(messages)
    payload: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": wire_turns(messages)}
    system = "\n\n".join(m.text for m in messages if isinstance(m, SystemMessage) and m.text)
    if system:
        payload["system"] = system
    if tools:
        payload["tools"] = [wire_tool(t) for t in tools]
    elif _used_tools(messages):
        payload["tools"] = [_stub_tool(name) for name in _used_tools(messages)]
        payload["tool_choice"] = {"type": "none"}
    return payload


def _used_tools(messages: Sequence[Message]) -> list[str]:
    """Names of tools called in the transcript, first use first."""
    names = (c.name for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls)
    return list(dict.fromkeys(names))


def _stub_tool(name: str) -> dict[str, Any]:
    """The API refuses tool_use/tool_result blocks unless tools are defined; with
    ``tool_choice: none`` these stubs satisfy that while offering the model nothing."""
    return {"name": name, "description": "Used earlier in this conversation; not available now.",
            "input_schema": {"type": "object"}}


def wire_turns(messages: Sequence[Message]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for msg in messages:
        role, blocks = _blocks(msg)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})
    for turn in turns:  # tool_result blocks must lead their user turn
        turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    return turns


def _blocks(msg: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(msg, SystemMessage):
        return "system", []
    if isinstance(msg, UserMessage):
        return "user", _text(msg.text)
    if isinstance(msg, ToolResultMessage):
        return "user", [{"type": "tool_result", "tool_use_id": msg.tool_call_id, "content": msg.content,
                         "is_error": msg.is_error}]
    return "assistant", _text(msg.text) + [_tool_use(c) for c in msg.tool_calls]


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text.strip() else []


def _tool_use(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}


def wire_tool(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description, "input_schema": dict(spec.parameters)}


def parse_anthropic_response(body: Mapping[str, Any]) -> ModelResponse:
    """Typed view of a Messages API response body (thinking and server-tool blocks are skipped)."""
    content = body.get("content")
    if not isinstance(content, list):
        raise MalformedResponse("Messages API response has no content list; check that llm_base_url is the "
                               "Anthropic API root (without /v1)")
    with malformed_guard("Messages API response"):
        text = "".join(_str(b.get("text", "")) for b in content if b.get("type") == "text")
        calls = tuple(ToolCall(id=_str(b["id"]), name=_str(b["name"]), arguments=_mapping(b.get("input") or {}))
                      for b in content if b.get("type") == "tool_use")
        reason = body.get("stop_reason") or (STOP_TOOL_CALLS if calls else STOP_END)
        return ModelResponse(message=AssistantMessage(text=text, tool_calls=calls), usage=_usage(body),
                             stop_reason=_STOPS.get(reason, reason), raw=dict(body))


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"tool_use input is a {type(value).__name__}, not an object")
    return value


def _usage(body: Mapping[str, Any]) -> Usage:
    u = body.get("usage") or {}
    cached = token_count(u.get("cache_creation_input_tokens")) + token_count(u.get("cache_read_input_tokens"))
    return Usage(token_count(u.get("input_tokens")) + cached, token_count(u.get("output_tokens")))



@dataclass(frozen=True)
class AnthropicModel:
    """A Claude model behind ``endpoint``."""

    name: str
    endpoint: Endpoint
    max_tokens: int = 1024

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *,
                 deadline: float | None = None) -> ModelResponse:
        payload = anthropic_payload(self.name, messages, tools, self.max_tokens)
        reply = post_json(self.endpoint, "v1/messages", payload, deadline)
        return replace(parse_anthropic_response(reply.body), attempts=reply.attempts)
