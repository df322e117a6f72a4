"""OpenAI chat-completions parameters bara cannot honour: refused with a 400 naming the parameter.

bara answers each turn with one plain-text message from its own pipeline. A request asking for more
choices, tool calls, log-probabilities, a JSON or audio answer would get a reply that silently
ignores it, so such a request is refused (``code: "unsupported_parameter"``, ``param``: its name),
while the neutral value of each (``n: 1``, ``tools: []``, ``response_format: {"type": "text"}``...) is
accepted. Sampling hints (``temperature``, ``top_p``, ``seed``, penalties...) and unknown fields are
accepted and ignored. So are ``max_tokens`` and ``stop``, knowingly: bara's own pipeline sets how long
an answer is, and most clients send them on every request, so refusing them would turn those clients
away (README, "bara serve").
"""

from __future__ import annotations

from typing import Any, Callable

from bara.serve.errors import ApiError


def _absent(value: Any) -> bool:
    return value is None or value is False or value == [] or value == {}


def _one(value: Any) -> bool:
    return value is None or (type(value) is int and value == 1)


def _no_tool_needed(value: Any) -> bool:
    return value is None or value in ("none", "auto")


def _text_format(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and value.get("type") == "text")


def _text_only(value: Any) -> bool:
    return value is None or value == ["text"]


#: parameter -> (accepted value?, what to send instead)
UNSUPPORTED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "n": (_one, "bara gives one answer per turn: omit n or send n=1 (send several requests for several answers)"),
    "tools": (_absent, "bara answers from its own knowledge base and memory and does not call client tools: "
                       "omit tools"),
    "tool_choice": (_no_tool_needed, "bara does not call client tools: omit tool_choice (or send \"none\")"),
    "functions": (_absent, "bara does not call client functions: omit functions"),
    "function_call": (_no_tool_needed, "bara does not call client functions: omit function_call"),
    "logprobs": (_absent, "bara does not return token log-probabilities: omit logprobs"),
    "top_logprobs": (lambda v: v is None or v == 0, "bara does not return token log-probabilities: omit top_logprobs"),
    "response_format": (_text_format, "bara answers in plain text: omit response_format or send {\"type\": \"text\"}"),
    "modalities": (_text_only, "bara answers in text only: omit modalities or send [\"text\"]"),
    "audio": (lambda v: v is None, "bara answers in text only: omit audio"),
}


def refuse_unsupported(fields: dict[str, Any]) -> None:
    """Raise a 400 for the first parameter in ``fields`` (the request as sent) that bara cannot honour."""
    for name, (accepted, instead) in UNSUPPORTED.items():
        if name in fields and not accepted(fields[name]):
            raise ApiError(400, "unsupported_parameter", f"{name}={_shown(fields[name])} is not supported: {instead}",
                           param=name)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
