"""OpenAI chat-completions parameters: those bara cannot honour are refused with a 400 naming the
parameter; the output parameters are checked and applied.

bara answers each turn with one plain-text message from its own pipeline. A request asking for more
choices, tool calls, log-probabilities, a JSON or audio answer would get a reply that silently
ignores it, so such a request is refused (``code: "unsupported_parameter"``, ``param``: its name),
while the neutral value of each (``n: 1``, ``tools: []``, ``response_format: {"type": "text"}``...) is
accepted. Sampling hints (``temperature``, ``top_p``, ``seed``, penalties...) and unknown fields are
accepted and ignored.

The output parameters are applied to the answer as an OpenAI model applies them while generating
(:func:`output_params`, :func:`apply_output`): ``stop`` (a string or up to 4) cuts the answer before the
first occurrence (finish_reason ``stop``); ``max_tokens`` / ``max_completion_tokens`` (the smaller, when
both are sent) truncate it to that many tokens by the pipeline's own token estimate
(:func:`bara.prompts.frames.estimate_tokens`), with finish_reason ``length``. ``stream`` must be a JSON
boolean: ``"stream": "yes"`` is a 400 (``invalid_type``), as it is for OpenAI, not a stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from bara.prompts.frames import CHARS_PER_TOKEN, estimate_tokens
from bara.serve.errors import ApiError

MAX_STOP = 4  # OpenAI's limit on stop sequences


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


@dataclass(frozen=True)
class OutputParams:
    """What the client asked of the answer's form: stream it, where to stop, how long at most."""

    stream: bool = False
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage


def output_params(fields: dict[str, Any]) -> OutputParams:
    """``stream``, ``stop``, ``max_tokens`` and ``max_completion_tokens`` of a request (as sent), checked as
    OpenAI checks them: a 400 in OpenAI's error shape naming the parameter and what to send instead."""
    stream = fields.get("stream")
    if stream is not None and type(stream) is not bool:
        raise _invalid("invalid_type", "stream", f"stream={_shown(stream)} must be a JSON boolean: send true or "
                       "false (or omit it)")
    limits = [_max_tokens(name, fields.get(name)) for name in ("max_tokens", "max_completion_tokens")]
    return OutputParams(bool(stream), _stop(fields.get("stop")), min((n for n in limits if n), default=None),
                        _include_usage(fields.get("stream_options")))


def _include_usage(options: Any) -> bool:
    """``stream_options.include_usage`` as sent: a JSON boolean ("no" is a 400, not true)."""
    value = options.get("include_usage") if isinstance(options, dict) else None
    if value is not None and type(value) is not bool:
        raise _invalid("invalid_type", "stream_options.include_usage", f"stream_options.include_usage="
                       f"{_shown(value)} must be a JSON boolean: send true or false (or omit it)")
    return bool(value)


def apply_output(answer: str, params: OutputParams) -> tuple[str, str]:
    """The answer as delivered and its finish_reason: cut before the first stop sequence (``stop``), then
    truncated to ``max_tokens`` by :func:`estimate_tokens` (``length``)."""
    cuts = [i for i in (answer.find(s) for s in params.stop) if i >= 0]
    text = answer[:min(cuts)] if cuts else answer
    if params.max_tokens is not None and estimate_tokens(text) > params.max_tokens:
        return text[:int(params.max_tokens * CHARS_PER_TOKEN)], "length"
    return text, "stop"


def _stop(value: Any) -> tuple[str, ...]:
    stops = [value] if isinstance(value, str) else value
    if value is None:
        return ()
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise _invalid("invalid_type", "stop", f"stop={_shown(value)} must be a string or a list of strings: send "
                       f"one stop sequence or a list of up to {MAX_STOP} (or omit it)")
    if len(stops) > MAX_STOP or not all(stops):
        raise _invalid("invalid_value", "stop", f"stop={_shown(value)}: send at most {MAX_STOP} non-empty stop "
                       "sequences")
    return tuple(stops)


def _max_tokens(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if type(value) is not int:
        raise _invalid("invalid_type", name, f"{name}={_shown(value)} must be an integer: send a whole number of "
                       "tokens, 1 or more (or omit it)")
    if value < 1:
        raise _invalid("invalid_value", name, f"{name}={value} must be 1 or more: send a whole number of tokens, "
                       "or omit it for the whole answer")
    return value


def _invalid(code: str, param: str, message: str) -> ApiError:
    return ApiError(400, code, message, param=param)
