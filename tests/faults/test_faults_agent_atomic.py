"""An agent-mode turn of `bara serve` is stored atomically with its trace: the trace is written in the
transaction that stores the turn (``TURN_STORED``), so a failure (or a crash) between the two leaves
neither, never a turn without its trace. Scripted model, real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from bara.app import Bara
from bara.domains.funds import FundsRepo
from bara.domains.funds.assistant import AgentAssistant
from bara.errors import StoreFullError
from bara.llm import ScriptedModel
from bara.serve.runtime import Runtime
from bara.settings import Settings


@pytest.fixture
def runtime(rfc_kb, embedder):
    db = rfc_kb("agent_atomic")
    settings = Settings(db=str(db), cache_dir=Path(db).parent)
    rt = Runtime(settings, mode="agent", bara=Bara(settings, embedder=embedder))
    FundsRepo(rt.bara.store)
    rt.bara.store.execute("INSERT INTO funds_users (id, name, created) VALUES (?, ?, ?)", ("u_oda", "Oda", "2026-01-01"))
    rt.bara.set_assistant("agent", AgentAssistant(rt.bara, model=ScriptedModel(["An index fund tracks an index."] * 4)),
                          fallback_offline=False)
    yield rt
    rt.close()


def _stored(rt: Runtime, cid: str) -> tuple[int, dict]:
    messages = rt.bara.store.query("SELECT COUNT(*) FROM messages WHERE user_id=? AND conversation_id=?", ("u_oda", cid))
    return int(messages[0][0]), rt.traces.for_conversation("u_oda", cid)


def test_an_agent_turn_is_stored_with_its_trace(runtime):
    out = runtime.run_turn("u_oda", "What is an index fund?", None)
    count, traces = _stored(runtime, out.conversation_id)
    assert count == 2 and sorted(traces) == [1], (count, traces)
    assert traces[1]["trace_id"] == out.trace["trace_id"] and traces[1]["mode"] == "agent"


def test_a_failed_trace_write_stores_nothing_of_the_agent_turn(runtime, monkeypatch):
    first = runtime.run_turn("u_oda", "What is an index fund?", None)
    save = runtime.traces.save

    def save_then_fail(user_id, trace):  # the trace row is written, then the disk fills up
        save(user_id, trace)
        raise StoreFullError("the disk is full")

    monkeypatch.setattr(runtime.traces, "save", save_then_fail)
    with pytest.raises(StoreFullError):
        runtime.run_turn("u_oda", "And a bond fund?", first.conversation_id)
    count, traces = _stored(runtime, first.conversation_id)
    assert count == 2 and sorted(traces) == [1], (count, traces)  # the second turn: neither its messages nor its trace
