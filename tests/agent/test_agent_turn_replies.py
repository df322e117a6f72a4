"""What the user reads when the model's reply is odd: a whole agent turn with a scripted model."""

from __future__ import annotations

import pytest

from bara.domains.funds import FundsRepo
from bara.domains.funds.assistant import AgentAssistant
from bara.llm import ScriptedModel
from bara.messages import AssistantMessage, ToolCall
from tests.kb_helpers import rfc_bara


@pytest.fixture(scope="module")
def bara(rfc_kb, embedder):
    with rfc_bara(rfc_kb, embedder, "agent_replies") as b:
        FundsRepo(b.store)
        b.store.execute("INSERT INTO funds_users (id, name, created) VALUES (?, ?, ?)", ("u_odd", "Oda", "2026-01-01"))
        yield b


@pytest.mark.parametrize("reply", ["", "   \n", AssistantMessage(text="")])
def test_an_empty_model_reply_is_explained_not_called_complete(bara, reply):
    call = AssistantMessage(tool_calls=(ToolCall("c1", "get_holdings", {}),))
    for script in ([reply], [call, reply]):
        result = AgentAssistant(bara, model=ScriptedModel(script)).turn("u_odd", "What do I hold?")
        assert "empty reply" in result.answer and "(complete)" not in result.answer, result.answer
        assert result.trace.gates.agent.status == "complete"


def test_non_finite_tool_arguments_leave_the_trace_strict_json(bara):
    import json

    call = AssistantMessage(tool_calls=(ToolCall("c1", "search_documents", {"query": "abc", "limit": float("nan")}),))
    result = AgentAssistant(bara, model=ScriptedModel([call, "ok"])).turn("u_odd", "What is an index fund?")
    assert result.answer == "ok"
    text = json.dumps(result.trace.to_json(), allow_nan=False)  # what serve stores and the timeline reads
    assert "not JSON numbers" in text
