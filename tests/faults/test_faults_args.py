"""Nesting bombs in tool arguments: an error envelope (exit 2 on the CLI), never a RecursionError,
whether the arguments come from `bara funds tool --args` or from a model's tool call in the agent loop."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from bara.agent import ToolContext, run_agent
from bara.agent.tools import parse_tool_args, run_tool
from bara.app import Bara
from bara.cli import app
from bara.domains.funds import build_fund_tools
from bara.llm import ScriptedModel
from bara.llm.base import ModelResponse
from bara.llm.openai_compat import parse_openai_response
from bara.messages import AssistantMessage, ToolCall, UserMessage
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore

BOMBS = {"lists_3000": "[" * 3000 + "]" * 3000,
         "object_holding_3000": '{"scheme": ' + "[" * 3000 + "]" * 3000 + "}",
         "objects_3000": '{"a": ' * 3000 + "1" + "}" * 3000,
         "object_holding_100": '{"scheme": ' + "[" * 100 + "]" * 100 + "}"}


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_parse_refuses_a_nesting_bomb_with_a_message(bomb):
    error = parse_tool_args(BOMBS[bomb], Settings().tool_args_max_depth)
    assert isinstance(error, str) and "nested" in error and "JSON object" in error


def test_parse_keeps_ordinary_arguments():
    limit = Settings().tool_args_max_depth
    assert parse_tool_args('{"schemes": ["A", "B"]}', limit) == {"schemes": ["A", "B"]}
    assert parse_tool_args("", limit) == {} and parse_tool_args(None, limit) == {}
    nested = {"a": {"b": [1, [2]]}}
    assert parse_tool_args(nested, limit) == nested


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_cli_tool_args_bomb_is_an_error_envelope_with_exit_2(bomb, tmp_path):
    db = tmp_path / "funds.db"
    Bara(Settings(db=str(db), cache_dir=tmp_path)).store.close()  # an existing (empty) store
    result = CliRunner().invoke(app, ["funds", "tool", "get_holdings", "--user", "u_asha", "--args", BOMBS[bomb],
                                      "--json", "--db", str(db)], env={"BARA_CACHE_DIR": str(tmp_path)})
    assert result.exit_code == 2, result.output
    envelope = json.loads(result.stdout)
    assert envelope["ok"] is False and "nested" in envelope["error"]
    assert "Traceback" not in result.output and not isinstance(result.exception, RecursionError)


def _ctx() -> ToolContext:
    return ToolContext("u_asha", SQLiteStore(":memory:"), Settings(), time.monotonic() + 60)


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_run_tool_refuses_bomb_strings_and_mappings(bomb):
    tools = build_fund_tools()
    envelope = run_tool(tools, "get_holdings", BOMBS[bomb], _ctx()).envelope()
    assert envelope["ok"] is False and "nested" in envelope["error"]
    deep_mapping: dict = {"scheme": []}
    inner = deep_mapping["scheme"]
    for _ in range(200):
        inner.append([])
        inner = inner[0]
    envelope = run_tool(tools, "get_holdings", deep_mapping, _ctx()).envelope()
    assert envelope["ok"] is False and "nested" in envelope["error"]


def test_agent_loop_reports_bomb_arguments_to_the_model_and_goes_on():
    """A model whose tool call carries a nesting bomb gets an error result and can answer."""
    body = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_holdings", "arguments": BOMBS["lists_3000"]}}]},
        "finish_reason": "tool_calls"}]}
    first = parse_openai_response(body)  # the adapter keeps the raw string; it does not raise
    assert first.message.tool_calls[0].raw_arguments == BOMBS["lists_3000"]
    model = ScriptedModel([first, ModelResponse(AssistantMessage("Sorry, that lookup failed."))])
    run = run_agent(model, [UserMessage("my holdings?")], build_fund_tools(), _ctx())
    assert run.status == "complete" and run.answer == "Sorry, that lookup failed."
    (record,) = run.tool_calls
    assert record.ok is False and "nested" in record.result["error"]
    json.dumps([r.result for r in run.tool_calls])


def test_agent_loop_with_bomb_mapping_from_the_model():
    deep: dict = {"scheme": "x"}
    for _ in range(100):
        deep = {"scheme": deep}
    model = ScriptedModel([ModelResponse(AssistantMessage(tool_calls=(ToolCall("c1", "compute_xirr", deep),))),
                           ModelResponse(AssistantMessage("done"))])
    run = run_agent(model, [UserMessage("xirr?")], build_fund_tools(), _ctx())
    assert run.status == "complete" and not run.tool_calls[0].ok and "nested" in run.tool_calls[0].result["error"]
