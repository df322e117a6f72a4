"""Tool contract: every failure becomes an error envelope the model can read, never an exception."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import pydantic
import pytest
from hypothesis import given, settings as hsettings, strategies as st
from pydantic import BaseModel, ConfigDict, Field

from bara.agent import Tool, ToolContext, ToolError, ToolResult, ToolServices, run_tool, toolbox
from bara.errors import InputError
from bara.settings import Settings


class SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=3, description="A focused natural-language query")
    limit: int = Field(5, ge=1, le=10)


class Filter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    field: str
    value: float


class FilterArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    filters: list[Filter]


def _search(ctx: ToolContext, args: SearchArgs) -> dict:
    return {"user": ctx.user_id, "query": args.query, "limit": args.limit}


DESC = "Search fund documents. Do NOT use for figures about the user's own portfolio."


def ctx(deadline_s: float = 10.0) -> ToolContext:
    return ToolContext("user-7", store=None, settings=Settings(), deadline=time.monotonic() + deadline_s,
                       services=ToolServices(domain={"funds": object()}))


def tools(*extra: Tool) -> dict[str, Tool]:
    return toolbox([Tool("search_documents", DESC, SearchArgs, _search), *extra])


def run(name: str, args, *extra: Tool, context: ToolContext | None = None) -> ToolResult:
    return run_tool(tools(*extra), name, args, context or ctx())


def test_ok_envelope_and_session_bound_user():
    result = run("search_documents", {"query": "exit load"})
    assert result.envelope() == {"ok": True, "data": {"user": "user-7", "query": "exit load", "limit": 5}}
    assert result.latency_ms >= 0 and result.error is None
    assert json.loads(result.to_json()) == result.envelope()


def test_json_string_arguments_are_accepted():
    assert run("search_documents", '{"query": "exit load", "limit": 2}').data["limit"] == 2


@pytest.mark.parametrize("args, error", [
    ({"query": "exit load", "limit": 50}, "limit: Input should be less than or equal to 10"),
    ({"query": "ab"}, "query: String should have at least 3 characters"),
    ({}, "query: Field required"),
    (None, "query: Field required"),
    ({"query": "abc", "user_id": "someone-else"}, "user_id: Extra inputs are not permitted"),
    ({"query": 3, "limit": "x"},
     "query: Input should be a valid string; limit: Input should be a valid integer, unable to parse string as an "
     "integer"),
    ("{not json", "arguments: not valid JSON"),
    ("[1, 2]", "arguments: expected a JSON object, got list"),
])
def test_invalid_arguments_become_path_message_errors(args, error):
    result = run("search_documents", args)
    assert result.ok is False and result.data is None
    assert result.error.startswith(error)
    assert result.envelope() == {"ok": False, "error": result.error}


def test_nested_error_paths_are_dotted():
    tool = Tool("filter_funds", "Filter funds. Not for documents.", FilterArgs, lambda c, a: len(a.filters))
    result = run("filter_funds", {"filters": [{"field": "aum", "value": 1}, {"field": "x", "value": "big"}]}, tool)
    assert result.error == "filters.1.value: Input should be a valid number, unable to parse string as a number"


def test_unknown_tool_lists_known_names():
    result = run("serach_documents", {"query": "abc"})
    assert result.error == "unknown tool 'serach_documents'; known tools: search_documents"


def _raiser(exc: Exception):
    def fn(ctx, args):
        raise exc
    return fn


def test_tool_error_message_goes_to_the_model_verbatim():
    tool = Tool("get_fund", "Fetch a fund. Not for documents.", SearchArgs, _raiser(ToolError("no fund named abc")))
    assert run("get_fund", {"query": "abc"}, tool).envelope() == {"ok": False, "error": "no fund named abc"}


def test_unexpected_exception_gives_class_and_message_without_traceback():
    tool = Tool("get_fund", "Fetch a fund. Not for documents.", SearchArgs, _raiser(KeyError("F9")))
    result = run("get_fund", {"query": "abc"}, tool)
    assert result.error == "KeyError: 'F9'"
    assert "Traceback" not in result.error and "File " not in result.error


def test_timeout_returns_promptly_with_contract_message():
    release = threading.Event()
    tool = Tool("slow", "Slow tool. Not for tests that mind waiting.", SearchArgs,
                lambda c, a: release.wait(5), timeout_s=0.2)
    start = time.perf_counter()
    result = run("slow", {"query": "abc"}, tool)
    release.set()
    assert result.error == "timeout: tool slow exceeded 0.2s"
    assert 0.18 <= time.perf_counter() - start < 1.0
    assert 150 <= result.latency_ms < 1000


def test_run_deadline_cuts_tools_short_and_refuses_after_it():
    tool = Tool("slow", "Slow tool. Not for quick answers.", SearchArgs, lambda c, a: time.sleep(2), timeout_s=5)
    result = run("slow", {"query": "abc"}, tool, context=ctx(deadline_s=0.2))
    assert result.error.startswith("timeout: tool slow was cut off by the run deadline")
    assert run("search_documents", {"query": "abc"}, context=ctx(deadline_s=-1)).error == (
        "timeout: the run's deadline passed before tool search_documents started")


def test_results_must_be_strict_json_but_models_and_dataclasses_convert():
    @dataclass(frozen=True)
    class Row:
        fund: str
        xirr: float

    bad = Tool("bad", "Returns a set. Not for use.", SearchArgs, lambda c, a: {1, 2})
    nan = Tool("nan", "Returns NaN. Not for use.", SearchArgs, lambda c, a: float("nan"))
    row = Tool("row", "Returns a row. Not for documents.", SearchArgs, lambda c, a: Row("F1", 0.12))
    model = Tool("model", "Returns a model. Not for documents.", SearchArgs, lambda c, a: a)
    assert run("bad", {"query": "abc"}, bad).error.startswith("TypeError: result is not strict JSON")
    assert run("nan", {"query": "abc"}, nan).ok is False
    assert run("row", {"query": "abc"}, row).data == {"fund": "F1", "xirr": 0.12}
    assert run("model", {"query": "abc"}, model).data == {"query": "abc", "limit": 5}


def test_spec_exposes_json_schema_of_args():
    spec = tools()["search_documents"].spec()
    assert spec.name == "search_documents" and spec.description == DESC
    assert spec.parameters["properties"]["limit"] == {"default": 5, "maximum": 10, "minimum": 1,
                                                      "title": "Limit", "type": "integer"}
    assert spec.parameters["required"] == ["query"] and spec.parameters["additionalProperties"] is False


class Loose(BaseModel):
    query: str


@pytest.mark.parametrize("kwargs, needle", [
    ({"name": "search docs"}, "letters, digits"),
    ({"description": "  "}, r"when \(not\) to use"),
    ({"args_model": Loose}, "extra='forbid'"),
])
def test_tool_definition_errors_say_how_to_fix(kwargs, needle):
    base = {"name": "search_documents", "description": DESC, "args_model": SearchArgs, "fn": _search}
    with pytest.raises(InputError, match=needle):
        Tool(**{**base, **kwargs})


def test_duplicate_tool_names_are_rejected():
    with pytest.raises(InputError, match="unique"):
        toolbox([tools()["search_documents"]] * 2)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=8)


@hsettings(max_examples=150, deadline=None)
@given(name=st.sampled_from(["search_documents", "nope", ""]),
       args=st.none() | st.text(max_size=30) | st.dictionaries(st.sampled_from(["query", "limit", "x"]), json_values))
def test_run_tool_never_raises(name, args):
    result = run(name, args)
    assert isinstance(result, ToolResult)
    envelope = json.loads(result.to_json())
    assert envelope["ok"] is result.ok and (result.ok or isinstance(envelope["error"], str))
    if result.ok:
        pydantic.TypeAdapter(SearchArgs).validate_python(args if isinstance(args, dict) else json.loads(args))


# ------------------------------------------- booleans are not numbers; a key is given once
class NumberArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int | None = None
    weight: float = 1.0
    flag: bool = False
    filters: list[Filter] = []


def _numbers(ctx: ToolContext, args: NumberArgs) -> dict:
    return args.model_dump()


@pytest.mark.parametrize("args, error", [
    ({"query": "abc", "limit": True}, "limit: Input should be an integer, not a boolean (got true)"),
    ('{"query": "abc", "limit": false}', "limit: Input should be an integer, not a boolean (got false)"),
    ({"count": True}, "count: Input should be an integer, not a boolean (got true)"),
    ({"weight": False}, "weight: Input should be a number, not a boolean (got false)"),
    ({"filters": [{"field": "nav", "value": True}]}, "filters.0.value: Input should be a number, not a boolean"),
    ({"count": True, "extra": 1}, "count: Input should be an integer, not a boolean (got true); extra: Extra inputs"),
])
def test_booleans_are_refused_for_number_arguments(args, error):
    tool = Tool("numbers", "Echoes numbers. Do NOT use for anything real.", NumberArgs, _numbers)
    result = run("numbers" if "query" not in str(args) else "search_documents", args, tool)
    assert result.ok is False and result.error.startswith(error), result.error


def test_integral_numbers_and_booleans_for_booleans_are_still_accepted():
    tool = Tool("numbers", "Echoes numbers. Do NOT use for anything real.", NumberArgs, _numbers)
    assert run("search_documents", {"query": "abc", "limit": 5.0}).data["limit"] == 5
    assert run("search_documents", {"query": "abc", "limit": "5"}).data["limit"] == 5
    assert run("numbers", {"count": 3, "weight": 2, "flag": True}, tool).data["flag"] is True


@pytest.mark.parametrize("raw, key", [
    ('{"query": "exit load", "limit": 2, "limit": 9}', "limit"),
    ('{"query": "exit load", "query": "expense ratio"}', "query"),
])
def test_a_key_given_twice_is_refused_and_named(raw, key):
    result = run("search_documents", raw)
    assert result.ok is False and result.error == f"{key}: given more than once in the arguments; send each argument once"


def test_a_provider_call_with_a_duplicate_key_reaches_the_tool_runner_as_raw_text():
    from bara.llm.openai_compat import _parse_call

    call = _parse_call({"id": "c1", "function": {"name": "search_documents",
                                                 "arguments": '{"query": "abc", "limit": 1, "limit": 9}'}}, 0)
    assert call.arguments == {} and call.raw_arguments is not None
    assert "limit: given more than once" in run("search_documents", call.raw_arguments).error
