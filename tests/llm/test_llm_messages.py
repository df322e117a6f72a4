"""Typed messages, their exact wire format for each provider (checked against the official SDK
request types), ScriptedModel, and building a model from settings."""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import typing
from typing import Any

import pydantic
import pytest
import typing_extensions
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

from bara.errors import ConfigError, InputError
from bara.llm import ModelResponse, ScriptedModel, ScriptExhaustedError, build_model, resolve_model
from bara.llm.anthropic import AnthropicModel, anthropic_payload
from bara.llm.openai_compat import OpenAICompatModel, openai_payload
from bara.messages import (AssistantMessage, SystemMessage, ToolCall, ToolResultMessage, ToolSpec, Usage,
                           UserMessage)
from bara.messages import check_tool_pairing, message_to_dict
from bara.settings import Settings, load_settings
from llm_fixtures import CALL_A, CALL_B, RESULT_A, RESULT_B, SPEC, transcript

SECRET = "sk-live-abcdefghijklmnop-SECRETTAIL"


def test_messages_are_frozen_and_tool_calls_become_tuples():
    msg = AssistantMessage("hi", [ToolCall("c1", "f", {"a": 1})])  # type: ignore[arg-type]
    assert isinstance(msg.tool_calls, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.text = "changed"  # type: ignore[misc]


def test_tool_result_must_carry_json_and_call_needs_id_and_name():
    with pytest.raises(InputError, match="json.dumps"):
        ToolResultMessage("c1", "f", "not json")
    assert ToolResultMessage("c1", "f", '{"ok": true, "data": null}').is_error is False
    with pytest.raises(InputError, match="non-empty id"):
        ToolCall("", "f")


def test_usage_adds_up():
    assert Usage(3, 4) + Usage(10, 1) == Usage(13, 5)
    assert (Usage(3, 4) + Usage()).total_tokens == 7


def _pair(*ids: str) -> AssistantMessage:
    return AssistantMessage("", tuple(ToolCall(i, "f") for i in ids))


def _res(i: str) -> ToolResultMessage:
    return ToolResultMessage(i, "f", "{}")


def test_pairing_accepts_parallel_results_in_any_order():
    check_tool_pairing([UserMessage("q"), _pair("a", "b"), _res("b"), _res("a"), AssistantMessage("done")])


@pytest.mark.parametrize("messages, needle", [
    ([UserMessage("q"), _pair("a", "b"), _res("a")], "b have no ToolResultMessage"),
    ([UserMessage("q"), _pair("a"), UserMessage("in between"), _res("a")], "a have no ToolResultMessage"),
    ([UserMessage("q"), _pair("a"), _res("a"), _res("a")], "already answered call 'a'"),
    ([UserMessage("q"), _res("zz")], "unknown or already answered call 'zz'"),
])
def test_pairing_rejects_broken_transcripts(messages, needle):
    with pytest.raises(InputError, match=needle):
        check_tool_pairing(messages)


def test_message_to_dict_is_json_friendly():
    assert message_to_dict(_pair("a")) == {"role": "assistant", "text": "",
                                           "tool_calls": [{"id": "a", "name": "f", "arguments": {}}]}
    assert message_to_dict(SystemMessage("s")) == {"role": "system", "text": "s"}
    raw = message_to_dict(AssistantMessage("", (ToolCall("b", "f", raw_arguments="{oops"),)))
    assert raw["tool_calls"][0]["raw_arguments"] == "{oops"


# --------------------------------------------------------------------------- ScriptedModel
def test_scripted_model_replays_and_records():
    spec = ToolSpec("f", "d", {"type": "object"})
    model = ScriptedModel(["plain", AssistantMessage("", (ToolCall("c", "f"),)),
                           lambda msgs, tools: f"saw {len(msgs)} messages and {len(tools)} tools",
                           ModelResponse(AssistantMessage("x"), Usage(5, 6), "max_tokens")])
    assert model.complete([UserMessage("q")], [spec]).message.text == "plain"
    assert model.complete([UserMessage("q")]).stop_reason == "tool_calls"
    assert model.complete([UserMessage("a"), UserMessage("b")], [spec]).message.text == "saw 2 messages and 1 tools"
    assert model.complete([]).usage == Usage(5, 6)
    assert [c.tool_names for c in model.calls] == [("f",), (), ("f",), ()]
    assert model.calls[0].messages == (UserMessage("q"),)
    with pytest.raises(ScriptExhaustedError, match="queue more replies"):
        model.complete([UserMessage("q")])


def test_scripted_model_raises_queued_exceptions():
    model = ScriptedModel([RuntimeError("provider down")])
    with pytest.raises(RuntimeError, match="provider down"):
        model.complete([UserMessage("q")])


# --------------------------------------------------------------------------- build_model
def test_no_model_configured_means_offline():
    assert build_model(Settings(), environ={}) is None
    assert resolve_model(Settings(model="  ")) is None


@pytest.mark.parametrize("model, provider, expected", [
    ("openai:gpt-4o-mini", "", ("openai", "gpt-4o-mini")),
    ("anthropic:claude-sonnet-4-5", "", ("anthropic", "claude-sonnet-4-5")),
    ("claude-haiku-4-5", "", ("anthropic", "claude-haiku-4-5")),
    ("llama3.1:8b", "", ("openai", "llama3.1:8b")),
    ("openai:llama3.1:8b", "", ("openai", "llama3.1:8b")),
    ("qwen2.5", "anthropic", ("anthropic", "qwen2.5")),
])
def test_resolve_model(model, provider, expected):
    assert resolve_model(Settings(model=model, llm_provider=provider)) == expected


def test_conflicting_provider_is_a_config_error():
    with pytest.raises(ConfigError, match="make them agree"):
        resolve_model(Settings(model="openai:gpt-4o", llm_provider="anthropic"))


def test_bara_model_env_selects_the_model():
    settings = load_settings(environ={"BARA_MODEL": "anthropic:claude-test", "BARA_LLM_MAX_TOKENS": "300"})
    model = build_model(settings, environ={"ANTHROPIC_API_KEY": SECRET})
    assert isinstance(model, AnthropicModel) and model.name == "claude-test" and model.max_tokens == 300
    assert model.endpoint.base_url == "https://api.anthropic.com"


def test_public_api_without_key_says_which_variable_to_set():
    with pytest.raises(ConfigError, match="export OPENAI_API_KEY=") as info:
        build_model(Settings(model="openai:gpt-4o-mini"), environ={})
    assert "unset BARA_MODEL" in str(info.value)


def test_custom_key_variable_and_keyless_local_server():
    s = Settings(model="gpt-x", llm_api_key_env="MY_KEY")
    model = build_model(s, environ={"MY_KEY": SECRET})
    assert isinstance(model, OpenAICompatModel) and model.endpoint.key_env == "MY_KEY"
    assert model.endpoint.headers()["Authorization"] == f"Bearer {SECRET}"
    local = build_model(Settings(model="llama3.1:8b", llm_base_url="http://127.0.0.1:11434/v1"), environ={})
    assert isinstance(local, OpenAICompatModel) and "Authorization" not in local.endpoint.headers()


def test_key_never_appears_in_reprs():
    model = build_model(Settings(model="openai:gpt-4o"), environ={"OPENAI_API_KEY": SECRET})
    assert model is not None
    for text in (repr(model), str(model), repr(model.endpoint), repr(model.endpoint.key), str(model.endpoint.key)):
        assert SECRET not in text


# --------------------------------------------------------------------------- strict SDK-type checker
# pydantic validates ``Iterable[...]`` fields lazily and ignores unknown TypedDict keys, so a plain
# TypeAdapter accepts e.g. tool-call arguments sent as an object. This walker checks eagerly: every
# key must be declared (unless the SDK type allows extras), Required keys present, each value typed.


def conform(value: Any, tp: Any, path: str = "$") -> list[str]:
    """Errors found checking ``value`` against SDK type ``tp`` (empty list = conforms)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Required, typing.NotRequired, typing.Annotated):
        return conform(value, args[0], path)
    if tp is object or tp is typing.Any:
        return []
    if origin is typing.Union:
        errors = [conform(value, member, path) for member in args]
        return [] if any(not e for e in errors) else [f"{path}: matches no member of {tp}: {min(errors, key=len)}"]
    if origin is typing.Literal:
        return [] if value in args else [f"{path}: {value!r} not in {args}"]
    if typing_extensions.is_typeddict(tp):
        return _conform_typeddict(value, tp, path)
    if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
        return _conform_model(value, tp, path)
    if origin in (dict, collections.abc.Mapping):
        return [] if isinstance(value, dict) else [f"{path}: expected object"]
    if origin is not None:  # Iterable, List, Sequence, SequenceNotStr
        if not isinstance(value, list):
            return [f"{path}: expected array, got {type(value).__name__}"]
        return [e for i, v in enumerate(value) for e in conform(v, args[0], f"{path}[{i}]")]
    return _conform_scalar(value, tp, path)


def _conform_typeddict(value: Any, tp: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected object for {tp.__name__}"]
    hints = typing.get_type_hints(tp, include_extras=True)
    required = {k for k, h in hints.items() if typing.get_origin(h) is typing.Required}
    allow_extra = getattr(tp, "__pydantic_config__", {}).get("extra") == "allow"
    errors = [f"{path}: missing {k}" for k in sorted(required - value.keys())]
    errors += [f"{path}: unknown key {k!r} for {tp.__name__}" for k in value if k not in hints and not allow_extra]
    return errors + [e for k, v in value.items() if k in hints for e in conform(v, hints[k], f"{path}.{k}")]


def _conform_model(value: Any, tp: type[pydantic.BaseModel], path: str) -> list[str]:
    try:
        tp.model_validate(value)
    except pydantic.ValidationError as exc:
        return [f"{path}: {exc.error_count()} errors as {tp.__name__}"]
    return []


def _conform_scalar(value: Any, tp: Any, path: str) -> list[str]:
    if tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    return [] if ok else [f"{path}: expected {getattr(tp, '__name__', tp)}, got {type(value).__name__}"]


@functools.cache
def adapter(tp: Any) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(tp)  # building one takes seconds: build each once


def assert_openai_request(payload: dict) -> None:
    assert conform(payload, CompletionCreateParamsNonStreaming) == []
    adapter(CompletionCreateParamsNonStreaming).validate_python(payload)


def assert_anthropic_request(payload: dict) -> None:
    assert conform(payload, MessageCreateParamsNonStreaming) == []
    adapter(MessageCreateParamsNonStreaming).validate_python(payload)




# --------------------------------------------------------------------------- the checker can fail
def test_checker_rejects_arguments_sent_as_object_and_unknown_keys():
    bad_args = {"model": "m", "messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"q": 1}}}]}]}
    extra_key = {"model": "m", "messages": [{"role": "tool", "tool_call_id": "c", "content": "{}", "name": "f"}]}
    assert conform(bad_args, CompletionCreateParamsNonStreaming)
    assert conform(extra_key, CompletionCreateParamsNonStreaming)
    system_as_message = {"model": "m", "max_tokens": 5,
                         "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": 7}]}]}
    assert conform(system_as_message, MessageCreateParamsNonStreaming)


# --------------------------------------------------------------------------- OpenAI wire format
def test_openai_payload_exact_shape_with_parallel_calls():
    payload = openai_payload("gpt-test", transcript(), [SPEC])
    assert payload == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are bara."},
            {"role": "user", "content": "Exit load and my XIRR?"},
            {"role": "assistant", "content": "Checking both.", "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "search_documents", "arguments": '{"query": "exit load"}'}},
                {"id": "call_b", "type": "function", "function": {"name": "get_xirr", "arguments": '{"fund": "F1"}'}},
            ]},
            {"role": "tool", "tool_call_id": "call_a", "content": RESULT_A.content},
            {"role": "tool", "tool_call_id": "call_b", "content": RESULT_B.content},
            {"role": "assistant", "content": "Exit load is 1%."},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [{"type": "function", "function": {"name": "search_documents", "description": SPEC.description,
                                                    "parameters": dict(SPEC.parameters)}}],
    }
    assert_openai_request(payload)


def test_openai_tool_only_assistant_has_null_content_and_raw_arguments_round_trip():
    bad = ToolCall("c1", "f", raw_arguments="{not json")
    payload = openai_payload("m", [UserMessage("q"), AssistantMessage("", (bad,)),
                                   ToolResultMessage("c1", "f", '{"ok": false, "error": "x"}', True)])
    assistant = payload["messages"][1]
    assert assistant == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}
    assert "tools" not in payload
    assert_openai_request(payload)


def test_payload_builders_refuse_unanswered_tool_calls():
    from bara.errors import InputError
    with pytest.raises(InputError, match="call_b"):
        openai_payload("m", [UserMessage("q"), AssistantMessage("", (CALL_A, CALL_B)), RESULT_A])
    with pytest.raises(InputError, match="call_b"):
        anthropic_payload("m", [UserMessage("q"), AssistantMessage("", (CALL_A, CALL_B)), RESULT_A,
                                UserMessage("between"), RESULT_B])


# --------------------------------------------------------------------------- Anthropic wire format
def test_anthropic_payload_exact_shape_with_parallel_calls():
    payload = anthropic_payload("claude-test", transcript(), [SPEC], max_tokens=512)
    assert payload == {
        "model": "claude-test", "max_tokens": 512, "system": "You are bara.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Exit load and my XIRR?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "call_a", "name": "search_documents", "input": {"query": "exit load"}},
                {"type": "tool_use", "id": "call_b", "name": "get_xirr", "input": {"fund": "F1"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": RESULT_A.content, "is_error": False},
                {"type": "tool_result", "tool_use_id": "call_b", "content": RESULT_B.content, "is_error": True}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Exit load is 1%."}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
        ],
        "tools": [{"name": "search_documents", "description": SPEC.description,
                   "input_schema": dict(SPEC.parameters)}],
    }
    assert_anthropic_request(payload)


def test_anthropic_tool_results_lead_one_user_turn_before_text():
    msgs = [UserMessage("q"), AssistantMessage("", (CALL_A, CALL_B)), RESULT_A, RESULT_B, UserMessage("also?")]
    turns = anthropic_payload("m", msgs, [SPEC])["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert turns[1]["content"][0]["type"] == "tool_use"  # no empty text block


def test_anthropic_call_without_tools_declares_stubs_with_tool_choice_none():
    payload = anthropic_payload("m", transcript()[:5], ())
    assert payload["tool_choice"] == {"type": "none"}
    assert [t["name"] for t in payload["tools"]] == ["search_documents", "get_xirr"]
    assert_anthropic_request(payload)
    assert "tools" not in anthropic_payload("m", [UserMessage("hi")], ())
