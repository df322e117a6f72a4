"""The episodic name index (table ``episodic_names``, step 0015) on SQLite and PostgreSQL.

Every check compares with the rule as it was before the index: every speaker and mention of the
user's ``episodic_sessions`` rows outside the conversation under way, decoded in Python, handed whole
to :func:`episodic_signals`. The index must give the same signals for every message, hold exactly one
row per (conversation, name) counting the sessions naming it, follow replaced sessions and forgetting,
keep users apart (row-level security on PostgreSQL) and be backfilled from the sessions stored
before the step.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime

import numpy as np
import pytest

from bara.decide.policy import capitalised_words, episodic_signals
from bara.memory.episodic import EpisodicMemory, Turn
from bara.settings import Settings

WHEN = datetime(2023, 5, 8, 13, 56)
DIM = 8
NEW_STEPS = {"0015_episodic_names", "0016_pg_episodic_names_rls", "0017_pg_episodic_names_shared_read_only"}

# (user, conversation, session, turns)
SESSIONS = [
    ("alice", "old", "s1", [Turn("Caroline", "I met Jolene near the Rockies, and Jolene loved it."),
                            Turn("Melanie", "I painted a lake; Gina liked it.")]),
    ("alice", "old", "s2", [Turn("Howard", "We took Luna to the vet with Gina.")]),
    ("alice", "old", "s3", [Turn("Howard", "We had dinner with Gina.")]),
    ("alice", "now", "t1", [Turn("user", "I adopted a puppy named Rex yesterday.")]),
    ("alice", "trip", "s1", [Turn("ZOË", "We flew to Stockholm."), Turn("MAÉLLE", "With Caroline, yes.")]),
    ("alice", "trip", "s2", [Turn("Caroline Smith", "I loved it.")]),
    ("bob", "b1", "s1", [Turn("Oscar", "My cat Bella sleeps all day, says Caroline.")]),
]

MESSAGES = [
    "When did Caroline go hiking?", "What did Mel and her kids make?", "Mel said what?",
    "How does TCP work?", "Tell me about How it went.", "Did Rex like the park?", "Is Zoë coming?",
    "Did Maélle call?", "What about Oscar and Bella?", "Did Jo call?", "Did we visit the Rockies?",
    "Would Caroline's kids like Stock markets?", "Is Car rental cheap? Ask Jol about it.",
    "what did I say about the lake?", "Hello there. Gin and tonic, Luna said.", "Did Carol Smith write?",
    "Is Melanie-Ann there?", "The weather in Tokyo is nice.", "",
]
EXCLUDES = ("", "now", "old", "trip", "nowhere")


class NoEncoder:
    """Every vector is given: an encoding here would be a bug in the test."""

    dim = DIM
    model_id = cache_key = "none"

    def embed(self, texts):  # pragma: no cover - never called
        raise AssertionError("vectors are given")


def _memory(store) -> EpisodicMemory:
    return EpisodicMemory(store, NoEncoder(), Settings())  # type: ignore[arg-type]


def _store(mem: EpisodicMemory, user: str, conv: str, session: str, turns: list[Turn]) -> None:
    vectors = np.full((len(turns), DIM), 1 / np.sqrt(DIM), dtype=np.float32)
    mem.add_session(user, conv, session, turns, WHEN, vectors)


def _sessions(store, user: str) -> list[tuple[str, set[str]]]:
    rows = store.query("SELECT conversation_id, speakers, mentions FROM episodic_sessions WHERE user_id=?", (user,))
    return [(c, {*json.loads(a or "[]"), *json.loads(b or "[]")}) for c, a, b in rows]


def full_names(store, user: str, exclude: str) -> frozenset[str]:
    """The names as the gate read them before the index: every session row outside ``exclude``."""
    return frozenset(n for c, names in _sessions(store, user) if c != exclude for n in names)


def recount(store, user: str) -> dict[tuple[str, str], int]:
    """What the index must hold for ``user``: per (conversation, name), the sessions naming it."""
    return dict(Counter((c, n) for c, names in _sessions(store, user) for n in names))


def indexed(store, user: str) -> dict[tuple[str, str], int]:
    rows = store.query("SELECT conversation_id, name, sessions FROM episodic_names WHERE user_id=?", (user,))
    return {(c, n): int(k) for c, n, k in rows}


def same_signals(mem: EpisodicMemory, user: str, users=("alice", "bob")) -> None:
    """The index agrees with the rule before it: rows, names() and every message's signals."""
    store = mem.store
    for who in users:
        assert indexed(store, who) == recount(store, who), who
    for exclude in EXCLUDES:
        every = full_names(store, user, exclude)
        assert mem.names(user, exclude) == every, exclude
        for message in MESSAGES:
            known = mem.known_names(user, exclude, capitalised_words(message))
            assert known <= every, (message, exclude)
            assert episodic_signals(message, known) == episodic_signals(message, every), (message, exclude)


def _named(mem: EpisodicMemory, user: str, exclude: str, message: str) -> bool:
    known = mem.known_names(user, exclude, capitalised_words(message))
    return "episodic:names_known_person" in episodic_signals(message, known)


def _check_index(store) -> None:
    mem = _memory(store)
    for user, conv, session, turns in SESSIONS:
        _store(mem, user, conv, session, turns)
    same_signals(mem, "alice")
    same_signals(mem, "bob")
    # the rule's cases, so that an empty or wrong index cannot agree by accident
    assert _named(mem, "alice", "now", "When did Caroline go hiking?")
    assert _named(mem, "alice", "now", "What did Mel and her kids make?")  # a short form inside a sentence
    assert not _named(mem, "alice", "now", "Mel said what?")  # ... not as a first word
    assert not _named(mem, "alice", "now", "How does TCP work?")  # "How" is not Howard
    assert _named(mem, "alice", "now", "Is Zoë coming?") and _named(mem, "alice", "now", "Did Maélle call?")
    assert _named(mem, "alice", "now", "Did Carol Smith write?")  # a short form of "Caroline Smith"
    assert not _named(mem, "alice", "now", "Did Rex like the park?")  # only in the conversation under way
    assert _named(mem, "alice", "old", "Did Rex like the park?")  # from another conversation
    assert not _named(mem, "alice", "old", "Tell me about How it went.")  # Howard spoke only in "old"
    assert _named(mem, "alice", "now", "Tell me about How it went.")
    assert not _named(mem, "alice", "", "What about Oscar and Bella?")  # bob's names
    assert _named(mem, "bob", "", "What about Oscar and Bella?")
    assert mem.known_names("alice", "now", ["Caroline", "Jol"]) == {"Caroline", "Caroline Smith", "Jolene"}
    assert mem.known_names("alice", "now", []) == frozenset()
    # one row per (conversation, name): Gina is named by three sessions of "old"
    assert indexed(store, "alice")[("old", "Gina")] == 3 and indexed(store, "alice")[("old", "Howard")] == 2
    _check_replace_and_forget(mem)


def _check_replace_and_forget(mem: EpisodicMemory) -> None:
    store = mem.store
    # s2 again without Gina and Luna: Gina stays (s1 and s3 name her), Luna goes (only s2 named her)
    _store(mem, "alice", "old", "s2", [Turn("Howard", "We went to the vet.")])
    assert indexed(store, "alice")[("old", "Gina")] == 2 and ("old", "Luna") not in indexed(store, "alice")
    assert "Luna" not in mem.names("alice", "now") and "Gina" in mem.names("alice", "now")
    same_signals(mem, "alice")
    _store(mem, "alice", "old", "s1", [Turn("Caroline", "Nothing new.")])
    _store(mem, "alice", "old", "s3", [Turn("Howard", "Dinner was fine.")])
    assert "Gina" not in mem.names("alice") and not _named(mem, "alice", "now", "Ask Gina about it.")
    assert ("old", "Melanie") not in indexed(store, "alice")
    _store(mem, "alice", "trip", "s3", [Turn("Caroline", "We met Gina in Stockholm.")])  # another conversation
    assert _named(mem, "alice", "now", "Ask Gina about it.") and not _named(mem, "alice", "trip", "Ask Gina about it.")
    same_signals(mem, "alice")
    mem.forget("alice")
    assert indexed(store, "alice") == {} and mem.names("alice") == frozenset()
    assert not _named(mem, "alice", "", "When did Caroline go hiking?")
    assert _named(mem, "bob", "", "When did Caroline go hiking?")  # bob's memory is his own
    same_signals(mem, "bob")


def test_index_gives_the_old_rules_signals_sqlite(tmp_path):
    from bara.store.sqlite import SQLiteStore

    with SQLiteStore(tmp_path / "n.db") as store:
        _check_index(store)


def test_index_gives_the_old_rules_signals_postgres(pg_store_factory):
    _check_index(pg_store_factory(dim=DIM))


def test_one_user_never_reads_or_writes_anothers_names_postgres(pg_store_factory):
    store = pg_store_factory(dim=DIM)
    mem = _memory(store)
    for user, conv, session, turns in SESSIONS:
        _store(mem, user, conv, session, turns)
    with store.scoped(["bob"]):
        assert {r[0] for r in store.query("SELECT user_id FROM episodic_names")} == {"bob"}
        assert mem.known_names("alice", "", ["Caroline", "Howard"]) == frozenset()
        assert mem.known_names("bob", "", ["Caroline", "Oscar"]) == {"Caroline", "Oscar"}
        with pytest.raises(Exception, match="row-level security"):
            store.execute("INSERT INTO episodic_names VALUES ('alice', 'x', 'Eve', 'ev', 1)")
    with store.scoped(["", "bob"]):  # a user's scope reads shared rows but may never write one
        with pytest.raises(Exception, match="row-level security"):
            store.execute("INSERT INTO episodic_names VALUES ('', 'x', 'Eve', 'ev', 1)")
    with store.scoped(["alice"]):
        assert store.execute("DELETE FROM episodic_names WHERE user_id='bob'") == 0
    assert indexed(store, "bob") == recount(store, "bob") != {}


# ----------------------------------------------------------------------------- backfill
# Sessions as an older bara stored them (the index did not exist): a name in two lists of one session,
# a name in several sessions of one conversation, an empty list written as an empty text.
OLD_ROWS = [
    ("alice", "old", "s1", ["Caroline", "Melanie"], ["Jolene", "Rockies", "Caroline"]),
    ("alice", "old", "s2", ["Caroline"], ["Jolene"]),
    ("alice", "old", "s3", ["Howard"], ""),
    ("alice", "now", "t1", ["user"], ["Rex"]),
    ("alice", "trip", "s1", ["ZOË"], ["MAÉLLE", "Stockholm"]),
    ("bob", "b1", "s1", ["Oscar"], ["Bella", "Caroline"]),
    ("bob", "b1", "t2", "", []),
]


def _old_row(user, conv, session, speakers, mentions) -> tuple:
    as_text = [v if isinstance(v, str) else json.dumps(v) for v in (speakers, mentions)]
    return (user, conv, session, 1.0, "", *as_text, 1)


_INSERT_OLD = ("INSERT INTO episodic_sessions (user_id, conversation_id, session, said_at, date_text, speakers,"
               " mentions, turns) VALUES ({})")


def _check_backfilled(store) -> None:
    mem = _memory(store)
    assert indexed(store, "alice")[("old", "Caroline")] == 2  # counted once per session, not per list
    assert indexed(store, "alice")[("old", "Jolene")] == 2 and indexed(store, "bob")[("b1", "Caroline")] == 1
    same_signals(mem, "alice")
    same_signals(mem, "bob")
    assert _named(mem, "alice", "now", "Did Maélle call?") and _named(mem, "alice", "old", "Did Rex bark?")
    assert not _named(mem, "alice", "now", "Did Rex bark?")
    # a backfilled session replaced: its old names leave only when no other session names them
    _store(mem, "alice", "old", "s1", [Turn("Melanie", "Nothing to say.")])
    assert indexed(store, "alice")[("old", "Caroline")] == 1 and ("old", "Rockies") not in indexed(store, "alice")
    same_signals(mem, "alice")


def test_backfill_from_older_sessions_sqlite(tmp_path):
    from bara.store.migrations import sqlite_migrations
    from bara.store.sqlite import SQLiteStore

    path = tmp_path / "old.db"
    with SQLiteStore(path, migrations=[m for m in sqlite_migrations() if m.name not in NEW_STEPS]) as old:
        assert not old.query("SELECT 1 FROM sqlite_master WHERE name='episodic_names'")
        old.executemany(_INSERT_OLD.format(", ".join("?" * 8)), [_old_row(*r) for r in OLD_ROWS])
    with SQLiteStore(path) as store:  # the pending step runs: table and backfill
        _check_backfilled(store)


def test_backfill_from_older_sessions_postgres(pg_server_urls, pg_schema, pg_store_factory, caplog):
    import psycopg
    from psycopg import sql

    from bara.store.migrations import postgres_migrations
    from bara.store.pg_admin import migrate

    older = [m for m in postgres_migrations(DIM) if m.name not in NEW_STEPS]
    migrate(pg_server_urls.owner_url, dim=DIM, schema=pg_schema, steps=older)
    with psycopg.connect(pg_server_urls.owner_url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(pg_schema)))
        conn.execute("SET bara.owners = '*'")  # row-level security binds the owner too (FORCE)
        with conn.cursor() as cur:
            cur.executemany(_INSERT_OLD.format(", ".join(["%s"] * 8)), [_old_row(*r) for r in OLD_ROWS])
    caplog.set_level("WARNING", logger="bara.store")
    store = pg_store_factory(dim=DIM)  # migrates the rest as the owner: the table, its backfill, its policies
    _check_backfilled(store)
    said = [r.getMessage() for r in caplog.records if r.name == "bara.store"]  # the upgrade is announced once
    assert len(said) == 1 and all(step in said[0] for step in NEW_STEPS)
