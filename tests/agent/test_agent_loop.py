"""The agent loop, driven by a ScriptedModel: skipping, retrying after errors, parallel calls, the cap."""

from __future__ import annotations

import json
import time

from pydantic import BaseModel, ConfigDict, Field

from bara.agent import INCOMPLETE_NOTE, AgentEvent, Tool, ToolContext, run_agent
from bara.llm import LLMUnavailableError, ModelResponse, ScriptedModel
from bara.messages import AssistantMessage, ToolCall, ToolResultMessage, Usage, UserMessage
from bara.settings import Settings


class SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=3)
    limit: int = Field(5, ge=1, le=10)


class FundArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fund: str


def _search(ctx: ToolContext, a: SearchArgs) -> list[str]:
    return [f"doc about {a.query}"][: a.limit]


def _xirr(ctx: ToolContext, a: FundArgs) -> dict:
    return {"user": ctx.user_id, "fund": a.fund, "xirr": -0.042}


TOOLS = [Tool("search_documents", "Search fund documents. Do NOT use for portfolio figures.", SearchArgs, _search),
         Tool("get_xirr", "XIRR of one of the user's funds. Not for document questions.", FundArgs, _xirr)]
QUESTION = [UserMessage("Why did my fund underperform?")]


def ctx(deadline_s: float = 10.0, **settings) -> ToolContext:
    return ToolContext("user-7", None, Settings(**settings), time.monotonic() + deadline_s)


def calls(*specs: tuple[str, str, dict]) -> AssistantMessage:
    return AssistantMessage("", tuple(ToolCall(i, n, a) for i, n, a in specs))


def envelope(msg) -> dict:
    assert isinstance(msg, ToolResultMessage)
    return json.loads(msg.content)


def test_direct_answer_skips_tools():
    model = ScriptedModel(["Thanks! Glad it helped."])
    run = run_agent(model, [UserMessage("Thanks, that helps.")], TOOLS, ctx())
    assert (run.status, run.answer, run.iterations, run.model_calls, run.tool_calls) == (
        "complete", "Thanks! Glad it helped.", 1, 1, ())
    assert model.calls[0].tool_names == ("search_documents", "get_xirr")


def test_compute_then_retrieve_builds_transcript_and_sums_usage():
    model = ScriptedModel([
        ModelResponse(calls(("c1", "get_xirr", {"fund": "F1"})), Usage(100, 10)),
        ModelResponse(calls(("c2", "search_documents", {"query": "F1 underperformance -4.2%"})), Usage(150, 12)),
        ModelResponse(AssistantMessage("F1 returned -4.2% because..."), Usage(200, 30)),
    ])
    run = run_agent(model, QUESTION, TOOLS, ctx())
    assert run.status == "complete" and run.error is None
    assert [type(m).__name__ for m in run.messages] == [
        "UserMessage", "AssistantMessage", "ToolResultMessage", "AssistantMessage", "ToolResultMessage",
        "AssistantMessage"]
    assert envelope(run.messages[2]) == {"ok": True, "data": {"user": "user-7", "fund": "F1", "xirr": -0.042}}
    assert run.usage == Usage(450, 52) and run.iterations == 3
    assert [(r.name, r.iteration, r.ok) for r in run.tool_calls] == [("get_xirr", 1, True),
                                                                     ("search_documents", 2, True)]
    assert model.calls[1].messages == run.messages[:3]  # the model saw the result of its call


def test_parallel_calls_each_run_and_are_appended_in_order():
    model = ScriptedModel([calls(("a", "search_documents", {"query": "exit load"}), ("b", "get_xirr", {"fund": "F2"}),
                                 ("c", "get_xirr", {"fund": "F3"})), "done"])
    run = run_agent(model, QUESTION, TOOLS, ctx())
    results = run.messages[2:5]
    assert [(m.tool_call_id, m.name) for m in results] == [("a", "search_documents"), ("b", "get_xirr"),
                                                            ("c", "get_xirr")]
    assert [envelope(m)["data"]["fund"] for m in results[1:]] == ["F2", "F3"]
    assert [r.iteration for r in run.tool_calls] == [1, 1, 1] and run.answer == "done"


def test_validation_error_is_fed_back_and_model_corrects_itself():
    def retry(messages, tools):
        last = envelope(messages[-1])
        assert last == {"ok": False, "error": "limit: Input should be less than or equal to 10"}
        return calls(("c2", "search_documents", {"query": "exit load", "limit": 10}))

    model = ScriptedModel([calls(("c1", "search_documents", {"query": "exit load", "limit": 50})), retry, "ok"])
    run = run_agent(model, QUESTION, TOOLS, ctx())
    assert run.status == "complete"
    assert [r.ok for r in run.tool_calls] == [False, True]
    assert run.messages[2].is_error is True and run.messages[4].is_error is False
    assert run.tool_calls[0].args == {"query": "exit load", "limit": 50}


def test_model_cannot_choose_the_user():
    model = ScriptedModel([calls(("c1", "get_xirr", {"fund": "F1", "user_id": "victim"})), "ok"])
    run = run_agent(model, QUESTION, TOOLS, ctx())
    assert run.tool_calls[0].result == {"ok": False, "error": "user_id: Extra inputs are not permitted"}


def test_non_json_arguments_reach_the_model_as_an_error():
    model = ScriptedModel([AssistantMessage("", (ToolCall("c1", "get_xirr", raw_arguments='{"fund": '),)), "ok"])
    run = run_agent(model, QUESTION, TOOLS, ctx())
    assert run.tool_calls[0].args == '{"fund": '
    assert run.tool_calls[0].result["error"].startswith("arguments: not valid JSON")


def test_iteration_cap_wraps_up_without_tools_and_marks_incomplete():
    spiral = [calls((f"c{i}", "search_documents", {"query": f"exit load v{i}"})) for i in range(3)]
    model = ScriptedModel([*spiral, "Exit load is probably 1%."])
    run = run_agent(model, QUESTION, TOOLS, ctx(), max_iterations=3)
    assert run.status == "incomplete" and run.iterations == 3 and run.model_calls == 4
    assert run.answer == INCOMPLETE_NOTE + "Exit load is probably 1%."
    assert [c.tool_names for c in model.calls] == [("search_documents", "get_xirr")] * 3 + [()]
    assert [r.ok for r in run.tool_calls] == [True, True, False]  # the 3rd round's call was not run
    assert run.tool_calls[2].result["error"].startswith("not run: the limit of 3 tool rounds was reached")
    final_view = model.calls[3].messages
    assert isinstance(final_view[-1], ToolResultMessage) and final_view[-1].tool_call_id == "c2"


def test_cap_defaults_to_settings_and_tool_calls_in_wrap_up_are_dropped():
    model = ScriptedModel([calls(("c1", "get_xirr", {"fund": "F1"})), calls(("c2", "get_xirr", {"fund": "F1"}))])
    run = run_agent(model, QUESTION, TOOLS, ctx(agent_max_iterations=1))
    assert run.status == "incomplete" and run.model_calls == 2
    assert run.messages[-1] == AssistantMessage(INCOMPLETE_NOTE + "I could not finish gathering what this "
                                                                  "question needs.")


def test_provider_failure_ends_run_with_error_and_keeps_transcript():
    model = ScriptedModel([calls(("c1", "get_xirr", {"fund": "F1"})),
                           LLMUnavailableError("openai kept failing (HTTP 503); retry later")])
    run = run_agent(model, QUESTION, TOOLS, ctx())
    assert run.status == "error"
    # the error reaches the user's answer: the kind of failure, not the provider's own text
    assert run.error == "the model provider is unavailable right now (LLMUnavailableError)"
    assert len(run.messages) == 3 and run.tool_calls[0].ok and run.answer == ""


def test_exhausted_script_and_passed_deadline_are_errors_not_exceptions():
    run = run_agent(ScriptedModel([]), QUESTION, TOOLS, ctx())
    assert run.status == "error" and "ScriptExhaustedError" in run.error
    model = ScriptedModel(["never used"])
    late = run_agent(model, QUESTION, TOOLS, ctx(deadline_s=-1))
    assert late.status == "error" and "deadline passed before model call 1" in late.error
    assert model.calls == () and late.messages == tuple(QUESTION)


def test_events_follow_the_run():
    events: list[AgentEvent] = []
    model = ScriptedModel([calls(("c1", "get_xirr", {"fund": "F1"})), "done"])
    run_agent(model, QUESTION, {t.name: t for t in TOOLS}, ctx(), on_event=events.append)
    assert [(e.kind, e.iteration) for e in events] == [("model_response", 1), ("tool_result", 1),
                                                       ("model_response", 2), ("finished", 2)]
    assert events[1].detail["name"] == "get_xirr" and events[-1].detail["status"] == "complete"


def test_deadline_is_passed_to_the_model():
    model = ScriptedModel(["ok"])
    context = ctx()
    run_agent(model, QUESTION, TOOLS, context)
    assert model.calls[0].deadline == context.deadline


def test_repeated_call_ids_are_made_unique_before_any_provider_sees_them():
    """A model that reuses ids (in one turn, or call_0 afresh every turn) still pairs each result with its call."""
    from bara.llm.anthropic import anthropic_payload
    from bara.llm.openai_compat import openai_payload

    model = ScriptedModel([calls(("call_0", "get_xirr", {"fund": "A"}), ("call_0", "get_xirr", {"fund": "B"})),
                           calls(("call_0", "get_xirr", {"fund": "C"})), "done"])
    run = run_agent(model, QUESTION, TOOLS, ctx())
    assert run.status == "complete" and [c.args["fund"] for c in run.tool_calls] == ["A", "B", "C"]
    ids = [c.id for c in run.tool_calls]
    assert len(set(ids)) == 3
    results = {m.tool_call_id: json.loads(m.content)["data"]["fund"] for m in run.messages
               if isinstance(m, ToolResultMessage)}
    assert results == dict(zip(ids, "ABC", strict=True))
    uses = [b["id"] for t in anthropic_payload("m", run.messages)["messages"] for b in t["content"]
            if b["type"] == "tool_use"]
    assert uses == ids
    wire = openai_payload("m", run.messages)["messages"]
    assert [c["id"] for m in wire for c in m.get("tool_calls", [])] == ids
    assert model.calls[2].messages == run.messages[:-1]  # the model was shown the renamed ids too


def test_a_flood_of_parallel_calls_is_capped_per_run_then_wrapped_up():
    """One reply may list any number of calls: past agent_max_tool_calls they are not run."""
    flood = calls(*((f"f{i}", "get_xirr", {"fund": "A"}) for i in range(50)))
    model = ScriptedModel([flood, "From what I have."])
    run = run_agent(model, QUESTION, TOOLS, ctx(agent_max_tool_calls=5))
    assert [c.ok for c in run.tool_calls] == [True] * 5 + [False] * 45
    assert all("limit of 5 tool calls" in c.result["error"] for c in run.tool_calls[5:])
    assert (run.status, run.model_calls) == ("incomplete", 2) and run.answer.startswith(INCOMPLETE_NOTE)
    assert model.calls[1].tools == ()  # the wrap-up offers no tools


def test_the_tool_call_cap_counts_across_rounds():
    twice = lambda n: calls((f"a{n}", "get_xirr", {"fund": "A"}), (f"b{n}", "get_xirr", {"fund": "A"}))  # noqa: E731
    model = ScriptedModel([twice(1), twice(2), "done"])
    run = run_agent(model, QUESTION, TOOLS, ctx(agent_max_tool_calls=3))
    assert [c.ok for c in run.tool_calls] == [True, True, True, False]
    assert (run.status, run.model_calls) == ("incomplete", 3)
    exact = run_agent(ScriptedModel([twice(1), "done"]), QUESTION, TOOLS, ctx(agent_max_tool_calls=2))
    assert (exact.status, exact.answer) == ("complete", "done")  # reaching the cap exactly is not cutting


def test_nan_and_infinity_in_arguments_are_refused_and_the_record_stays_strict_json():
    """json.loads accepts NaN/Infinity; JSON does not: the model is told, and traces stay strict."""
    from bara.llm.openai_compat import parse_openai_response

    wire = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "w1", "type": "function", "function": {"name": "search_documents",
                                                      "arguments": '{"query": "exit load", "limit": NaN}'}}]}}]}
    parsed = parse_openai_response(wire).message
    mapped = calls(("m1", "search_documents", {"query": "exit load", "limit": float("inf")}),
                   ("m2", "get_xirr", {"fund": "A", "extra": [float("-inf")]}))
    run = run_agent(ScriptedModel([parsed, mapped, "done"]), QUESTION, TOOLS, ctx())
    assert [c.ok for c in run.tool_calls] == [False, False, False]
    assert "NaN is not a JSON number" in run.tool_calls[0].result["error"]
    assert all("NaN and Infinity are not JSON numbers" in c.result["error"] for c in run.tool_calls[1:])
    json.dumps([c.args for c in run.tool_calls], allow_nan=False)  # the trace's copy of the arguments
