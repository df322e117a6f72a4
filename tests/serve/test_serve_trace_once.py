"""A served turn's trace is written once, in its final form, as the last write of the transaction that stores
the turn (issue 33: it was an INSERT inside the transaction, then an UPDATE of the same JSON in a
transaction of its own). What the store received is read from SQLite's own statement trace."""

from __future__ import annotations

from serve_helpers import sqlite_runtime

from bara.store.sqlite import SQLiteStore

MESSAGE = "My name is Ada. What does the HSTS max-age directive specify?"


def test_a_served_turn_stores_its_final_trace_in_one_statement(rfc_kb, embedder):
    runtime = sqlite_runtime(rfc_kb("trace_once"), embedder)  # learning before the response: the default
    sent: list[str] = []
    store = runtime.bara.store
    assert isinstance(store, SQLiteStore)
    store._conn.set_trace_callback(lambda s: sent.append(s) if "serve_traces" in s else None)
    try:
        out = runtime.run_turn("alice", MESSAGE, None)
        assert [s.split()[0] for s in sent] == ["INSERT"]  # no UPDATE of it afterwards
        stored = runtime.traces.for_conversation("alice", out.conversation_id)[1]
        assert stored == out.trace  # what the response shows is what was stored
        assert "persist" in stored["latency_ms"] and "persist:profile_name" in stored["reasons"]  # final form
        assert stored["stored"]["turn"] is True
    finally:
        runtime.close()
