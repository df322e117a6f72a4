"""Write-behind of a turn's learning writes (issue 16): off the answer path, never lost on a normal
close, and always seen by the next turn; answers, traces and stored memory equal to writing in-turn."""

from __future__ import annotations

import asyncio

import pytest
from fastapi import BackgroundTasks
from serve_helpers import sqlite_runtime

from bara.app import Bara
from bara.memory.writebehind import WriteBehind
from bara.turn.gated import Assistant
from bara.settings import Settings

DECISION = "Let's go with HSTS with a one-year max-age for the internal API."
QUESTION = "What does the includeSubDomains directive do?"


def _open(db, embedder, **changes) -> Bara:
    return Bara(Settings(db=str(db), cache_dir=db.parent, **changes), embedder=embedder)


def _memory(bara: Bara, user: str) -> dict:
    bara.flush()
    return {"notes": [(n.kind, n.text) for n in bara.notes.list(user)],
            "qa": [(q.question, q.answer) for q in bara.qa.list(user)],
            "episodes": bara.store.count_chunks(owner=user, collection="episodic")}


def test_learning_writes_wait_until_after_the_answer_and_the_next_turn_sees_them(rfc_kb, embedder):
    with _open(rfc_kb("wb-next"), embedder) as bara:
        a, user = Assistant(bara), "u-next"
        first = a.turn(user, DECISION)
        assert "persist:note_decision" in first.trace.reasons
        assert len(bara.learning) > 0 and bara.notes.list(user) == []  # queued, not yet stored
        recap = a.turn(user, "What did we decide about HSTS?", first.conversation_id)
        assert recap.trace.tiers["notes"] == 1 and "We decided: Let's go with HSTS" in recap.answer


def test_nothing_learned_is_lost_on_a_normal_close(rfc_kb, embedder):
    db = rfc_kb("wb-close")
    with _open(db, embedder) as bara:
        first = Assistant(bara).turn("u-close", QUESTION)
        assert first.trace.stored.qa is True and len(bara.learning) > 0
    with _open(db, embedder) as again:  # a new process would see the same file
        assert [q.question for q in again.qa.list("u-close")] == [QUESTION]
        assert again.store.count_chunks(owner="u-close", collection="episodic") == 1


@pytest.mark.parametrize("messages", [(DECISION, QUESTION, "What did we decide about HSTS?", QUESTION)])
def test_write_behind_changes_no_answer_trace_or_stored_memory(rfc_kb, embedder, messages):
    runs = []
    for behind in (False, True):
        with _open(rfc_kb(f"wb-same-{behind}"), embedder, memory_write_behind=behind) as bara:
            a, cid, out = Assistant(bara), None, []
            for m in messages:
                r = a.turn("u-same", m, cid)
                cid = r.conversation_id
                out.append((r.answer, r.trace.reasons, r.trace.stored, r.trace.tiers))
            runs.append((out, _memory(bara, "u-same")))
    assert runs[0] == runs[1]


def test_a_flush_stores_writes_in_order_under_each_users_scope(tmp_path):
    scopes: list[tuple] = []

    class Store:
        def scoped(self, owners):
            scopes.append(tuple(owners))
            from contextlib import nullcontext
            return nullcontext()

        def transaction(self):
            from contextlib import nullcontext
            return nullcontext()

    wb, done = WriteBehind(Store()), []
    wb.defer("a", lambda: done.append("a1"))
    wb.defer("b", lambda: done.append("b1"))
    wb.defer("a", lambda: done.append("a2"))
    assert wb.flush() == 3 and done == ["a1", "a2", "b1"] and [s[-1] for s in scopes] == ["a", "b"]
    assert wb.flush() == 0 and len(wb) == 0


def test_serve_with_several_workers_stores_what_a_turn_learned_before_it_responds(rfc_kb, embedder):
    """The queue is per process: with several workers the next turn may reach another one
    (``bara serve --workers N`` turns ``serve_learn_after_response`` off; tests/serve/test_serve_learning.py)."""
    runtime = sqlite_runtime(rfc_kb("wb-serve"), embedder, serve_learn_after_response=False)
    try:
        out = runtime.run_turn("u-serve", QUESTION, None)
        assert out.trace["stored"]["qa"] is True
        assert len(runtime.bara.learning) == 0
        assert [q.question for q in runtime.bara.qa.list("u-serve")] == [QUESTION]
    finally:
        runtime.close()


def test_serve_can_leave_them_for_after_the_response(rfc_kb, embedder):
    runtime = sqlite_runtime(rfc_kb("wb-serve-later"), embedder, serve_learn_after_response=True)
    try:
        out = runtime.run_turn("u-serve", QUESTION, None)
        assert out.trace["stored"]["qa"] is True and len(runtime.bara.learning) > 0  # still queued
        background = BackgroundTasks()  # what the endpoint runs once the response is sent
        runtime.learn_later(background)
        assert len(runtime.bara.learning) > 0 and len(background.tasks) == 1
        asyncio.run(background())
        assert len(runtime.bara.learning) == 0
        assert [q.question for q in runtime.bara.qa.list("u-serve")] == [QUESTION]
    finally:
        runtime.close()
