"""PostgreSQL round trips of a turn's reads and writes (issue 33: two workers on PostgreSQL against one on
SQLite). A round trip is one psycopg pipeline (one Sync) or one statement sent outside a pipeline; both are
counted here from psycopg's own calls on the test's thread, and what the statements stored is read back."""

from __future__ import annotations

import threading

import psycopg
import pytest

from bara.errors import UnknownConversationError
from bara.memory.conversations import Conversations
from bara.memory.episodic import EpisodicMemory
from bara.memory.profile import ProfileFact, ProfileMemory


class Trips:
    """Round trips sent by this thread (the pool configures new connections on its own threads)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n, me = 0, threading.get_ident()
        real_execute, real_pipeline = psycopg.Connection.execute, psycopg.Connection.pipeline
        trips = self

        def execute(conn, query, *a, **k):
            if threading.get_ident() == me and conn._pipeline is None:
                trips.n += 1
            return real_execute(conn, query, *a, **k)

        def pipeline(conn):
            if threading.get_ident() == me and conn._pipeline is None:
                trips.n += 1
            return real_pipeline(conn)

        monkeypatch.setattr(psycopg.Connection, "execute", execute)
        monkeypatch.setattr(psycopg.Connection, "pipeline", pipeline)


@pytest.fixture
def store(pg_store_factory):
    return pg_store_factory()


def _messages(store, user: str) -> list[tuple]:
    with store.scoped([user]):
        return store.query("SELECT seq, role, text FROM messages WHERE user_id=? ORDER BY seq", (user,))


def test_a_recorded_turn_is_one_round_trip_then_its_commit(store, monkeypatch):
    conv = Conversations(store)
    cid = conv.create("u1")
    trips = Trips(monkeypatch)
    with store.scoped(["u1"]):
        assert conv.record_turn("u1", cid, "hi", "hello", {"k": 1}) == (1, 2)
    assert trips.n == 2  # BEGIN + UPDATE conversations + both messages' INSERT; then COMMIT
    assert _messages(store, "u1") == [(1, "user", "hi"), (2, "assistant", "hello")]
    assert conv.load_state("u1", cid) == {"k": 1} and conv.list("u1")[0].turn_count == 1


def test_a_turn_recorded_in_a_conversation_not_the_users_stores_nothing(store):
    conv = Conversations(store)
    cid = conv.create("bob")
    with pytest.raises(UnknownConversationError):
        with store.scoped(["alice"]):
            conv.record_turn("alice", cid, "hi", "hello", {})
    with store.scoped(["alice"]), pytest.raises(UnknownConversationError):
        conv.record_turn("alice", "no-such-id", "hi", "hello", {})
    assert _messages(store, "alice") == [] and _messages(store, "bob") == []


def test_a_turns_other_first_reads_ride_in_its_conversations_round_trip(store, monkeypatch):
    conv, profile = Conversations(store), ProfileMemory(store)
    cid, other = conv.create("u1"), conv.create("u1")
    with store.scoped(["u1"]):
        conv.record_turn("u1", cid, "I am Ada", "hello Ada", {})
        profile.set_facts("u1", [ProfileFact("name", "Ada", "I am Ada")])
        store.execute("INSERT INTO episodic_sessions (user_id, conversation_id, session, said_at, date_text, speakers,"
                      " mentions, turns) VALUES (?, ?, 't1', 0, '', '[]', '[]', 1)", ("u1", other))
    also = {"profile": profile.read("u1"), "holds_other": EpisodicMemory.holds_other_read("u1", cid),
            "holds_other_of_other": EpisodicMemory.holds_other_read("u1", other)}
    trips = Trips(monkeypatch)
    with store.scoped(["u1"]):
        view = conv.turn_view("u1", cid, 8, 2, also)
    assert trips.n == 1
    assert view is not None and [m.text for m in view.messages] == ["I am Ada", "hello Ada"]
    assert view.also == {"profile": {"name": "Ada"}, "holds_other": True, "holds_other_of_other": False}


def test_a_queued_write_rides_with_the_next_round_trip(store, monkeypatch):
    conv = Conversations(store)
    cid = conv.create("u1")
    trips = Trips(monkeypatch)
    with store.scoped(["u1"]), store.transaction():
        conv.record_turn("u1", cid, "a", "b", {})
        store.write("INSERT INTO serve_threads (user_id, thread_hash, conversation_id, created_at) VALUES (?,?,?,0)",
                    ("u1", "h1", cid))
        assert trips.n == 1  # not sent yet
    assert trips.n == 2  # with the COMMIT
    with store.scoped(["u1"]):
        assert store.query("SELECT conversation_id FROM serve_threads WHERE user_id=?", ("u1",)) == [(cid,)]


def test_a_failed_queued_write_rolls_the_whole_transaction_back(store):
    conv = Conversations(store)
    cid = conv.create("u1")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):  # another user's row: refused by the database
        with store.scoped(["u1"]), store.transaction():
            conv.record_turn("u1", cid, "a", "b", {})
            store.write("INSERT INTO serve_threads (user_id, thread_hash, conversation_id, created_at)"
                        " VALUES (?,?,?,0)", ("u2", "h1", cid))
    assert _messages(store, "u1") == []  # the turn went with it
    with store.scoped(["u1"]):  # the pooled connection is clean for the next transaction
        assert conv.record_turn("u1", cid, "c", "d", {}) == (1, 2)


def test_queued_writes_of_a_nested_level_are_kept_when_it_ends_and_dropped_when_it_fails(store):
    insert = "INSERT INTO serve_threads (user_id, thread_hash, conversation_id, created_at) VALUES (?,?,'c',0)"
    with store.scoped(["u1"]), store.transaction():
        with store.transaction():  # nothing else of this level is sent: its write still commits
            store.write(insert, ("u1", "kept"))
        with pytest.raises(RuntimeError), store.transaction():
            store.write(insert, ("u1", "dropped"))
            raise RuntimeError("the level fails before anything of it was sent")
    with store.scoped(["u1"]):
        assert store.query("SELECT thread_hash FROM serve_threads WHERE user_id=?", ("u1",)) == [("kept",)]


def test_a_transaction_whose_statement_failed_is_never_reported_committed(store):
    """A failure an inner caller swallowed leaves the transaction aborted; PostgreSQL would answer its COMMIT
    with a ROLLBACK and no error, so the store says so instead of returning as if it was stored."""
    conv = Conversations(store)
    cid = conv.create("u1")
    with pytest.raises(Exception, match="nothing of it was stored"):
        with store.scoped(["u1"]), store.transaction():
            conv.record_turn("u1", cid, "a", "b", {})
            try:
                store.execute("SELECT 1/0")
            except psycopg.errors.DivisionByZero:
                pass
    assert _messages(store, "u1") == []


def test_a_users_write_in_a_turns_scope_needs_no_scope_of_its_own_and_gains_no_rights(store, monkeypatch):
    """A turn runs in ``["", user]``: the user's own writes run in that scope (the write policy lets a listed
    scope write only its non-shared owners' rows), so reads and writes alternate with one set_config."""
    from store_contract import doc, vecs

    from bara.types import SHARED

    sent: list[str] = []
    real_execute = psycopg.Connection.execute

    def execute(conn, query, *a, **k):
        sent.append(str(query))
        return real_execute(conn, query, *a, **k)

    monkeypatch.setattr(psycopg.Connection, "execute", execute)
    read = "SELECT COUNT(*) FROM documents WHERE owner=?"
    with store.scoped([SHARED, "u1"]), store.transaction():
        assert store.query(read, ("u1",)) == [(0,)]
        store.write_document(doc("n1", ["a note"], owner="u1", collection="notes"), vecs(1))
        assert store.query(read, ("u1",)) == [(1,)]
        store.write_document(doc("n2", ["another"], owner="u1", collection="notes"), vecs(1))
    assert sum("set_config('bara.owners'" in q for q in sent) == 1  # the pool's connection setup sets others
    with store.scoped(["u1"]):
        assert store.list_sources("u1", "notes") == ["n1", "n2"]
    with pytest.raises(psycopg.errors.InsufficientPrivilege), store.scoped([SHARED, "u1"]):
        store.write_document(doc("kb.txt", ["not the user's to write"]), vecs(1))
    with store.scoped([SHARED, "u1"]), pytest.raises(psycopg.errors.InsufficientPrivilege):
        store.execute("INSERT INTO serve_threads (user_id, thread_hash, conversation_id, created_at)"
                      " VALUES (?,?,'c',0)", ("u2", "h"))
    assert store.list_sources(SHARED, "kb") == []
