"""Users' full-text rows live in their own FTS5 table (``memory_fts``), the knowledge base's in
``chunks_fts`` (issue 16 round 10): FTS5's ``bm25()`` takes N, document frequencies and the average
length from its whole table, so in one table every user's memory moved the knowledge base's scores for
everyone, and one user's private text moved another's ranking."""

from __future__ import annotations

import json
import logging
import os
import random
import sqlite3
import subprocess
import sys
from dataclasses import replace

import pytest
from store_contract import doc, request, unit, vecs

from bara.store import sqlite_lexical
from bara.store.migrations import sqlite_migrations
from bara.store.sqlite import SQLiteStore
from bara.store.sqlite_lexical import KB_FTS

WORDS = ("retransmission timer backoff congestion window growth header checksum cipher suite certificate "
         "renegotiation handshake record fragment alert session ticket resumption").split()
QUERIES = ("retransmission timer backoff", "cipher suite handshake alert", "session ticket resumption window")
STEP = "0202_sqlite_memory_fts"


def _texts(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 25))) for _ in range(n)]


def _kb(store: SQLiteStore, seed: int = 7) -> None:
    rng = random.Random(seed)
    for n in range(10):
        store.write_document(doc(f"kb{n}.txt", _texts(rng, 5)), vecs(5))


def _memory(store: SQLiteStore, users: int = 4, docs: int = 6, seed: int = 11) -> None:
    """Several users' notes, heavy in the knowledge base's own terms (so they would move its IDF)."""
    rng = random.Random(seed)
    for u in range(users):
        for n in range(docs):
            texts = [("retransmission cipher " * rng.randint(1, 8)) + t for t in _texts(rng, 3)]
            store.write_document(doc(f"note{n}", texts, owner=f"user{u}", collection="notes"), vecs(3))


def _lexical(store: SQLiteStore, req) -> list[tuple[int, float | None, int | None]]:
    return [(c.chunk_id, c.lexical.score, c.lexical.rank) for c in store.search(req).candidates]


def _kb_requests(**kw):
    return [request(q, unit(1.0), limit=12, use_dense=False, **kw) for q in QUERIES]


@pytest.fixture
def store(sqlite_store):
    return sqlite_store


def test_the_knowledge_bases_scores_do_not_move_when_users_store_memory(store):
    _kb(store)
    reqs = [replace(r, in_memory_lexical=False) for r in _kb_requests()]
    before = [_lexical(store, r) for r in reqs]
    assert all(before)
    _memory(store)
    assert [_lexical(store, r) for r in reqs] == before
    assert [_lexical(store, replace(r, skip_scope_test=False)) for r in reqs] == before


def test_the_in_memory_arm_does_not_move_either_and_reads_no_row_counts(store):
    _kb(store)
    reqs = _kb_requests(in_memory_min_chunks=0, in_memory_after=1)
    for r in reqs:
        store.search(r)
    store.wait_for_indexes()
    before = [_lexical(store, r) for r in reqs]
    _memory(store)
    seen: list[str] = []
    store.trace(seen.append)
    assert [_lexical(store, r) for r in reqs] == before
    assert seen and not any("bm25(" in q for q in seen)  # scored in memory
    assert not any("bara_fts_rows" in q for q in seen)  # the knowledge base is its table: no row counts


def test_memory_searches_find_the_users_own_rows_and_never_anothers(store):
    _kb(store)
    _memory(store)
    for user in ("user0", "user3"):
        req = request("retransmission cipher", unit(1.0), owners=(user,), collections=("notes",), limit=50,
                      use_dense=False)
        ids = [c.chunk_id for c in store.search(req).candidates]
        assert len(ids) == store.count_chunks(user, "notes")
        assert {c.owner for c in store.get_chunks(ids)} == {user}


def test_one_users_memory_does_not_move_anothers_knowledge_base_ranking(store):
    """The side channel: a user's private text changed what every other user's search ranked."""
    _kb(store)
    req = replace(_kb_requests()[0], in_memory_lexical=False)
    before = _lexical(store, req)
    store.write_document(doc("secret", ["retransmission " * 30] * 4, owner="mallory", collection="notes"), vecs(4))
    assert _lexical(store, req) == before


def _fts_rowids(store: SQLiteStore) -> dict[str, list[int]]:
    return {table: [r for (r,) in store.query(f"SELECT rowid FROM {table} ORDER BY rowid")]
            for table in ("chunks_fts", "memory_fts")}


def _chunk_ids(store: SQLiteStore) -> dict[str, list[int]]:
    return {"chunks_fts": [r for (r,) in store.query("SELECT id FROM chunks WHERE owner = '' ORDER BY id")],
            "memory_fts": [r for (r,) in store.query("SELECT id FROM chunks WHERE owner <> '' ORDER BY id")]}


def test_writes_and_deletes_leave_no_orphan_row_in_either_table(store):
    _kb(store)
    _memory(store)
    assert _fts_rowids(store) == _chunk_ids(store)
    store.write_document(doc("kb3.txt", ["new text for a replaced document"], version="2"), vecs(1))
    store.write_document(doc("note2", ["a replaced note"], owner="user1", collection="notes", version="2"), vecs(1))
    assert _fts_rowids(store) == _chunk_ids(store)
    assert store.delete_document("kb4.txt") and store.delete_document("note1", owner="user2", collection="notes")
    assert _fts_rowids(store) == _chunk_ids(store)
    assert store.delete_owner("user0") == 6
    assert _fts_rowids(store) == _chunk_ids(store)
    assert store.delete_owner("") == 9  # the shared owner too
    assert _fts_rowids(store) == _chunk_ids(store) and _fts_rowids(store)["chunks_fts"] == []


def test_a_search_mixing_the_shared_owner_and_a_user_returns_both(store):
    """Only the library API can ask for one: both tables are searched and merged by score, then id."""
    _kb(store)
    _memory(store)
    req = request("retransmission cipher", unit(1.0), owners=("", "user1"), collections=("kb", "notes"), limit=40,
                  use_dense=False, in_memory_min_chunks=0, in_memory_after=1)
    rows = _lexical(store, req)
    owners = {c.owner for c in store.get_chunks([i for i, _, _ in rows])}
    assert owners == {"", "user1"}
    scores = [s for _, s, _ in rows]
    assert scores == sorted(scores, reverse=True)
    assert _lexical(store, req) == rows  # deterministic (and no lexicon: a user is searched)
    ahead = store.prefetch_lexical(req)  # the worker connection runs the same merge
    assert ahead is not None and [(c.chunk_id, c.lexical.score) for c in store.search_prefetched(req, ahead).candidates] \
        == [(i, s) for i, s, _ in rows]


def _write_all(store: SQLiteStore) -> None:
    _kb(store)
    _memory(store, users=3, docs=4)
    store.write_document(doc("kb2.txt", ["replaced shared text retransmission"], version="2"), vecs(1))
    store.write_document(doc("note0", ["replaced note cipher"], owner="user1", collection="notes", version="2"),
                         vecs(1))


def test_the_migration_moves_every_users_row_with_its_rowid(tmp_path, monkeypatch):
    old = tmp_path / "old.db"
    with monkeypatch.context() as m:  # the store before the step: one table for every owner
        m.setattr(sqlite_lexical, "fts_table", lambda owner: KB_FTS)
        s = SQLiteStore(old, [step for step in sqlite_migrations() if step.name != STEP])
        _write_all(s)
        s.close()
    with sqlite3.connect(old) as conn:
        rows = {r[0]: r for r in conn.execute("SELECT rowid, body, heading, scope FROM chunks_fts")}
        assert "memory_fts" not in {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
    migrated, fresh = SQLiteStore(old), SQLiteStore(tmp_path / "fresh.db")
    try:
        _write_all(fresh)
        ids = _chunk_ids(migrated)
        assert ids["memory_fts"] and ids["chunks_fts"] and sorted(rows) == sorted(ids["chunks_fts"] + ids["memory_fts"])
        assert _fts_rowids(migrated) == ids == _chunk_ids(fresh)
        for table in ("chunks_fts", "memory_fts"):
            moved = migrated.query(f"SELECT rowid, body, heading, scope FROM {table} ORDER BY rowid")
            assert moved == [rows[i] for i in ids[table]]
        reqs = [replace(r, in_memory_lexical=False) for r in _kb_requests()] + [
            request(q, unit(1.0), owners=(u,), collections=("notes",), limit=20)
            for q in QUERIES for u in ("user0", "user1", "user2")]
        assert [_lexical(migrated, r) for r in reqs] == [_lexical(fresh, r) for r in reqs]
        assert [(c.chunk_id, c.fused) for r in reqs for c in migrated.search(r).candidates] == \
            [(c.chunk_id, c.fused) for r in reqs for c in fresh.search(r).candidates]
    finally:
        migrated.close()
        fresh.close()


def _store_before_the_step(path) -> None:
    with pytest.MonkeyPatch.context() as m:  # the store an earlier bara wrote: one table for every owner
        m.setattr(sqlite_lexical, "fts_table", lambda owner: KB_FTS)
        s = SQLiteStore(path, [step for step in sqlite_migrations() if step.name != STEP])
        _write_all(s)
        s.close()


def test_an_upgraded_store_says_so_before_its_schema_step_and_only_once(tmp_path, caplog):
    old = tmp_path / "old.db"
    _store_before_the_step(old)
    caplog.set_level(logging.WARNING, logger="bara.store")
    SQLiteStore(old).close()
    said = [r for r in caplog.records if r.name == "bara.store"]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert STEP in said[0].getMessage() and str(old) in said[0].getMessage()
    caplog.clear()
    SQLiteStore(old).close()  # nothing left to apply
    SQLiteStore(tmp_path / "new.db").close()  # a new store's steps are its creation, not an upgrade
    assert [r for r in caplog.records if r.name == "bara.store"] == []


def test_the_cli_prints_the_upgrade_on_stderr_and_keeps_stdout_clean(tmp_path):
    old = tmp_path / "old.db"
    _store_before_the_step(old)
    env = {**os.environ, "BARA_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "bara.cli", "memory", "inspect", "--db", str(old), "--user", "user1",
                           "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert STEP in done.stderr and "once" in done.stderr
    assert json.loads(done.stdout)["user"] == "user1"
