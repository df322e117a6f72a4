"""What a user can see of their episodic memory (``EpisodicMemory.overview``, :mod:`bara.memory.episodic_audit`)
on SQLite and PostgreSQL: per conversation its sessions, turns, dates, indexed names and latest turns, bounded
with the rest counted; never another user's rows; nothing after forgetting."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime

import numpy as np

from bara.memory import episodic_audit
from bara.memory.dates import fmt_day
from bara.memory.episodic import COLLECTION, EpisodicMemory, Turn, episode_text
from bara.settings import Settings

DIM = 8
MAY8, MAY25, JUN1, JUN2 = (datetime(2023, 5, 8, 13, 56), datetime(2023, 5, 25, 9, 0),
                           datetime(2023, 6, 1, 18, 30), datetime(2023, 6, 2, 8, 15))
MAY9, MAY10 = datetime(2023, 5, 9, 10, 0), datetime(2023, 5, 10, 10, 0)

# (user, conversation, session, when, turns), stored in this order
SESSIONS = [
    ("alice", "trip", "s1", MAY8, [Turn("Caroline", "I met Jolene near the Rockies."),
                                   Turn("Melanie", "I painted a lake; Gina liked it.")]),
    ("alice", "trip", "s2", MAY25, [Turn("Caroline", "We took Luna to the vet with Gina.")]),
    ("bob", "b1", "s1", MAY9, [Turn("Oscar", "My cat Zqbobcat sleeps all day.")]),
    ("bob", "trip", "s1", MAY10, [Turn("Oscar", "I went to Zqbobtown.")]),  # alice's ids, bob's words
    ("alice", "chat", "t1", JUN1, [Turn("user", "I adopted a puppy named Rex yesterday.")]),
    ("alice", "chat", "t2", JUN2, [Turn("user", "Rex chewed my Zqaliceshoe.")]),
]
ALICE_WORDS = ("Caroline", "Jolene", "Rockies", "Gina", "Luna", "Rex", "Zqaliceshoe", "chat")


class NoEncoder:
    """Every vector is given: an encoding here would be a bug in the test."""

    dim = DIM
    model_id = cache_key = "none"

    def embed(self, texts):  # pragma: no cover - never called
        raise AssertionError("vectors are given")


def _memory(store, **overrides) -> EpisodicMemory:
    return EpisodicMemory(store, NoEncoder(), Settings(**overrides))  # type: ignore[arg-type]


def _store_all(mem: EpisodicMemory) -> None:
    for user, conv, session, when, turns in SESSIONS:
        vectors = np.full((len(turns), DIM), 1 / np.sqrt(DIM), dtype=np.float32)
        mem.add_session(user, conv, session, turns, when, vectors)


def _texts(conv: episodic_audit.EpisodeConversation) -> list[str]:
    return [t.text for t in conv.remembered]


def _said(when: datetime, *turns: Turn) -> list[str]:
    return [episode_text(t.speaker, t.text, when) for t in turns]


def _check_overview(store) -> None:
    mem = _memory(store)
    _store_all(mem)
    seen = mem.overview("alice")
    assert seen.turns == 5 and seen.conversations_left_out == 0
    chat, trip = seen.conversations  # most recently said first
    assert (chat.conversation_id, chat.sessions, chat.turns) == ("chat", 2, 2)
    assert (chat.first_date, chat.last_date) == (fmt_day(JUN1), fmt_day(JUN2)) == ("1 June 2023", "2 June 2023")
    assert (chat.first_said_at, chat.last_said_at) == (JUN1.timestamp(), JUN2.timestamp())
    assert chat.names == ("user", "Rex", "Zqaliceshoe") and chat.names_left_out == 0  # most sessions first
    assert _texts(chat) == [*_said(JUN1, SESSIONS[4][4][0]), *_said(JUN2, SESSIONS[5][4][0])]
    assert [(t.session, t.turn_id, t.speaker) for t in chat.remembered] == [("t1", "1", "user"), ("t2", "1", "user")]
    assert chat.remembered_left_out == 0
    assert (trip.conversation_id, trip.sessions, trip.turns) == ("trip", 2, 3)
    assert (trip.first_date, trip.last_date) == ("8 May 2023", "25 May 2023")
    assert trip.names == ("Caroline", "Gina", "Jolene", "Luna", "Melanie", "Rockies")
    assert _texts(trip) == [*_said(MAY8, *SESSIONS[0][4]), *_said(MAY25, *SESSIONS[1][4])]
    assert not any("Zqbob" in t or "Oscar" in t for c in seen.conversations for t in [*_texts(c), *c.names])
    _check_bounds(store)
    _check_replace_and_forget(mem)


def _check_bounds(store) -> None:
    """The latest turns of the latest conversations, oldest first; whatever is left out is counted."""
    small = episodic_audit.overview(store, "alice", episodic_audit.Bounds(conversations=1, turns=2, names=2),
                                    COLLECTION)
    assert [c.conversation_id for c in small.conversations] == ["chat"] and small.conversations_left_out == 1
    assert small.turns == 5 and small.conversations[0].names == ("user", "Rex")
    assert small.conversations[0].names_left_out == 1
    two_turns = _memory(store, memory_inspect_episodic_turns=2).overview("alice").conversations[1]
    assert two_turns.conversation_id == "trip" and two_turns.remembered_left_out == 1
    assert _texts(two_turns) == [*_said(MAY8, SESSIONS[0][4][1]), *_said(MAY25, *SESSIONS[1][4])]  # across sessions
    nothing = _memory(store, memory_inspect_episodic_conversations=0, memory_inspect_episodic_turns=0,
                      memory_inspect_episodic_names=0)
    none = nothing.overview("alice")
    assert (none.conversations, none.conversations_left_out, none.turns) == ((), 2, 5)
    names_only = _memory(store, memory_inspect_episodic_turns=0, memory_inspect_episodic_names=0).overview("alice")
    assert [(c.remembered, c.remembered_left_out, c.names, c.names_left_out) for c in names_only.conversations] == [
        ((), 2, (), 3), ((), 3, (), 6)]


def _check_replace_and_forget(mem: EpisodicMemory) -> None:
    """A replaced session shows its new turns once; forgetting alice leaves her nothing and bob everything."""
    mem.add_session("alice", "trip", "s2", [Turn("Caroline", "Nothing new.")], MAY25, np.ones((1, DIM), np.float32))
    trip = mem.overview("alice").conversations[1]
    assert trip.turns == 3 and _texts(trip)[-1] == episode_text("Caroline", "Nothing new.", MAY25)
    assert "Luna" not in trip.names and len(trip.remembered) == 3
    bob = mem.overview("bob")
    assert [(c.conversation_id, c.turns, c.names) for c in bob.conversations] == [
        ("trip", 1, ("Oscar", "Zqbobtown")), ("b1", 1, ("Oscar", "Zqbobcat"))]
    assert not any(w in json.dumps(asdict(bob)) for w in ALICE_WORDS)
    mem.forget("alice")
    assert mem.overview("alice") == episodic_audit.EpisodicOverview((), 0, 0)
    assert mem.overview("bob") == bob


def test_overview_sqlite(sqlite_store):
    _check_overview(sqlite_store)


def test_overview_postgres(pg_store_factory):
    _check_overview(pg_store_factory(dim=DIM))


def test_overview_under_row_level_security_postgres(pg_store_factory):
    """Inside a user's database scope (as every API request runs) the report reads that user's rows only,
    whichever user id it is asked about."""
    store = pg_store_factory(dim=DIM)
    mem = _memory(store)
    _store_all(mem)
    with store.scoped(["bob"]):
        assert mem.overview("alice") == episodic_audit.EpisodicOverview((), 0, 0)
        bob = mem.overview("bob")
    assert bob == mem.overview("bob") and bob.turns == 2
    with store.scoped(["alice"]):
        assert [c.conversation_id for c in mem.overview("alice").conversations] == ["chat", "trip"]


def test_a_session_without_a_date_has_empty_dates(sqlite_store):
    mem = _memory(sqlite_store)
    mem.add_session("carol", "c", "s1", [Turn("Carol", "Hello there.")], None, np.ones((1, DIM), np.float32))
    (conv,) = mem.overview("carol").conversations
    assert (conv.first_date, conv.last_date, conv.turns) == ("", "", 1)
    assert _texts(conv) == ["Carol: Hello there."]
