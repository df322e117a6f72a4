"""The HTTP service's records of a user's turns: stored traces (``serve_traces``, one per answered turn)
and OpenAI thread links (``serve_threads``: which conversation a message history continues).

These repositories own the tables' SQL; the service's handlers call them and never write SQL
themselves. The tables are created by the ``0005_owner_keys`` step (:mod:`bara.memory.owner_keys`),
from the statements here. Every table is per-user: its primary key starts with ``user_id``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from bara.store.base import SqlRunner
from bara.text.surrogates import json_without_surrogates

TRACES_TABLE = """CREATE TABLE serve_traces (
    user_id TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    mode TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    trace TEXT NOT NULL,
    PRIMARY KEY (user_id, trace_id))"""

THREADS_TABLE = """CREATE TABLE serve_threads (
    user_id TEXT NOT NULL,
    thread_hash TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (user_id, thread_hash))"""


class TraceRecords:
    """Per-user stored traces (``serve_traces``), one per answered turn, as JSON objects."""

    def __init__(self, store: SqlRunner):
        self.store = store

    def save(self, user_id: str, trace: dict[str, Any]) -> None:
        # one statement: atomic by itself, and part of the caller's transaction when there is one (a turn's,
        # whose COMMIT it then rides with on PostgreSQL: SqlRunner.write)
        self.store.write("INSERT INTO serve_traces (user_id, trace_id, conversation_id, turn, mode,"
                           " created_at, trace) VALUES (?,?,?,?,?,?,?)",
                           (user_id, trace["trace_id"], trace["conversation_id"], int(trace["turn"]),
                            trace["mode"], time.time(), json.dumps(trace, sort_keys=True)))

    def for_conversation(self, user_id: str, conversation_id: str) -> dict[int, dict[str, Any]]:
        rows = self.store.query("SELECT turn, trace FROM serve_traces WHERE user_id=? AND conversation_id=?"
                                " ORDER BY turn, created_at", (user_id, conversation_id))
        return {int(t): _loads(body) for t, body in rows}

    def get(self, user_id: str, trace_id: str) -> dict[str, Any] | None:
        rows = self.store.query("SELECT trace FROM serve_traces WHERE user_id=? AND trace_id=?", (user_id, trace_id))
        return _loads(rows[0][0]) if rows else None

    def forget(self, user_id: str) -> int:
        with self.store.transaction():
            return self.store.execute("DELETE FROM serve_traces WHERE user_id=?", (user_id,))


def _loads(body: str) -> Any:
    """A stored trace; lone surrogates (kept by traces saved before messages were cleaned) become U+FFFD,
    so reading an old conversation can never fail to encode."""
    return json_without_surrogates(json.loads(body))


class ThreadLinks:
    """Which of the user's conversations an OpenAI-style message history continues (``serve_threads``),
    keyed by the history's hash."""

    def __init__(self, store: SqlRunner):
        self.store = store

    def find(self, user_id: str, thread_hash: str) -> str | None:
        """The conversation id linked to ``thread_hash``, or None."""
        rows = self.store.query("SELECT conversation_id FROM serve_threads WHERE user_id=? AND thread_hash=?",
                                (user_id, thread_hash))
        return str(rows[0][0]) if rows else None

    def link(self, user_id: str, thread_hash: str, conversation_id: str) -> None:
        """Link ``thread_hash`` to ``conversation_id`` (a link of the same hash is moved)."""
        with self.store.transaction():
            self.store.execute("INSERT INTO serve_threads (user_id, thread_hash, conversation_id, created_at)"
                               " VALUES (?,?,?,?) ON CONFLICT (user_id, thread_hash) DO UPDATE SET"
                               " conversation_id=excluded.conversation_id",
                               (user_id, thread_hash, conversation_id, time.time()))


def forget_service_records(runner: SqlRunner, user_id: str, conversation_id: str | None = None) -> int:
    """Delete the HTTP service's records of one conversation of the user (or of all of them): its turn traces
    (each holds the message, the answer and what was retrieved) and its OpenAI thread links. Whatever deletes
    a conversation calls this, so no surface leaves the user's words behind in ``serve_traces``. Returns how
    many traces went."""
    where, params = "user_id=?", (user_id,)
    if conversation_id is not None:
        where, params = where + " AND conversation_id=?", (user_id, conversation_id)
    runner.execute(f"DELETE FROM serve_threads WHERE {where}", params)
    return int(runner.execute(f"DELETE FROM serve_traces WHERE {where}", params))
