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
