"""A shared LLM transcript for the message, payload and provider tests: a parallel tool call with
one success and one failure, then a follow-up user turn."""

from __future__ import annotations

from bara.messages import AssistantMessage, SystemMessage, ToolCall, ToolResultMessage, ToolSpec, UserMessage

SPEC = ToolSpec("search_documents", "Search factsheets. Do NOT use for the user's own portfolio figures.",
                {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
CALL_A = ToolCall("call_a", "search_documents", {"query": "exit load"})
CALL_B = ToolCall("call_b", "get_xirr", {"fund": "F1"})
RESULT_A = ToolResultMessage("call_a", "search_documents", '{"ok": true, "data": ["1% within a year"]}')
RESULT_B = ToolResultMessage("call_b", "get_xirr", '{"ok": false, "error": "fund: unknown"}', is_error=True)


def transcript() -> list:
    return [SystemMessage("You are bara."), UserMessage("Exit load and my XIRR?"),
            AssistantMessage("Checking both.", (CALL_A, CALL_B)), RESULT_A, RESULT_B,
            AssistantMessage("Exit load is 1%."), UserMessage("Thanks")]
