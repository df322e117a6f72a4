"""SQLite backend: the shared contract plus what is specific to a file on disk."""

from __future__ import annotations

import sqlite3

import pytest

from bara.errors import StoreError
from bara.store.migrations import Migration, sqlite_migrations
from bara.store.sqlite import SQLiteStore, chunks_sql
from store_contract import StoreContract, doc, request, vecs


class TestSQLiteContract(StoreContract):
    @pytest.fixture
    def store(self, tmp_path):
        s = SQLiteStore(tmp_path / "bara.db")
        yield s
        s.close()


def test_reopen_is_idempotent_and_keeps_data(tmp_path):
    path = tmp_path / "x.db"
    with SQLiteStore(path) as s:
        s.write_document(doc("a.txt", ["kept"]), vecs(1))
    with SQLiteStore(path) as s:
        assert s.list_sources() == ["a.txt"]
        names = [r[0] for r in s.query("SELECT name FROM bara_migrations ORDER BY seq")]
        assert names == [m.name for m in sqlite_migrations()]


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "x.db"
    SQLiteStore(path, migrations=[*sqlite_migrations(), Migration("9999_future", ("SELECT 1",))]).close()
    with pytest.raises(StoreError, match="newer bara"):
        SQLiteStore(path)


def test_corrupt_file_names_the_file(tmp_path):
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"this is not a database at all" * 200)
    with pytest.raises(StoreError, match="corrupt.db"):
        SQLiteStore(path)


def test_foreign_sqlite_database_is_refused(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="another program"):
        SQLiteStore(path)


def test_interrupt_mid_document_rolls_back(tmp_path):
    """KeyboardInterrupt inside the write transaction leaves no part of the document."""
    s = SQLiteStore(tmp_path / "x.db")
    with pytest.raises(KeyboardInterrupt):
        with s.transaction():
            s.write_document(doc("a.txt", ["one", "two"]), vecs(2))
            raise KeyboardInterrupt
    assert s.list_sources() == [] and s.count_chunks() == 0
    s.close()


def test_second_connection_sees_writes(tmp_path):
    path = tmp_path / "x.db"
    reader, writer = SQLiteStore(path), SQLiteStore(path)
    from store_contract import request, unit
    assert reader.search(request("alpha", unit(1.0))).candidates == ()
    writer.write_document(doc("a.txt", ["alpha"]), vecs(1))
    assert len(reader.search(request("alpha", unit(1.0))).candidates) == 1
    reader.close(), writer.close()


@pytest.mark.parametrize("owners", [None, 1, 2])
def test_hits_are_read_by_id_not_by_scanning_their_scope(tmp_path, owners):
    """A search's handful of hits is looked up by primary key, whatever the knowledge base's size:
    SQLite's planner, left alone, walked the owner index (every shared chunk) instead."""
    store = SQLiteStore(tmp_path / "plan.db")
    try:
        for n in range(3):
            store.write_document(doc(f"d{n}.txt", [f"chunk {n} {i}" for i in range(40)]), vecs(40))
        sql = chunks_sql(4, owners)
        params = (1, 5, 9, 77, *([""] * (owners or 0)))
        plan = " | ".join(row[3] for row in store.query("EXPLAIN QUERY PLAN " + sql, params))
        assert "SEARCH c USING INTEGER PRIMARY KEY" in plan and "chunks_scope" not in plan, plan
        assert [c.id for c in store.get_chunks([9, 1, 77], owners=None if owners is None else [""] * owners)] == [9, 1, 77]
    finally:
        store.close()


def _rows(store: SQLiteStore) -> dict[str, list]:
    """Every stored row a search or read depends on (the documents' write times aside)."""
    return {"documents": store.query("SELECT id, owner, collection, source, title, content_hash, meta FROM documents"
                                     " ORDER BY id"),
            "chunks": store.query("SELECT * FROM chunks ORDER BY id"),
            "kb_fts": store.query("SELECT rowid, body, heading, scope FROM chunks_fts ORDER BY rowid"),
            "memory_fts": store.query("SELECT rowid, body, heading, scope FROM memory_fts ORDER BY rowid")}


def test_bulk_write_stores_what_one_document_at_a_time_stores(tmp_path):
    docs = [doc("a.txt", ["TCP retransmission timer", "UDP checksum"]), doc("n.txt", ["we chose Postgres"], owner="u1",
            collection="notes"), doc("b.txt", ["DNS resolver cache"]), doc("a.txt", ["TCP timer, replaced"], version="2")]
    vectors = [vecs(2), vecs(1, 2), vecs(1, 3), vecs(1, 4)]
    with SQLiteStore(tmp_path / "one.db") as one, SQLiteStore(tmp_path / "bulk.db") as bulk:
        ids = [one.write_document(d, v) for d, v in zip(docs, vectors, strict=True)]
        assert bulk.write_documents(list(zip(docs, vectors, strict=True))) == ids
        assert _rows(bulk) == _rows(one)
        assert bulk.list_sources() == ["a.txt", "b.txt"] and bulk.document_hash("a.txt") == "a.txt-2"
        gens = dict(((o, c), g) for o, c, g in bulk.query("SELECT owner, collection, gen FROM scope_generation"))
        assert gens == {("", "kb"): 1, ("u1", "notes"): 1}  # each scope moved once, not once a document


def test_bulk_write_is_one_transaction_and_is_seen_by_a_cached_search(tmp_path):
    with SQLiteStore(tmp_path / "x.db") as s:
        s.write_document(doc("a.txt", ["TCP retransmission timer"]), vecs(1))
        before = s.search(request("DNS resolver", vecs(1, 5)[0]))  # caches the scope's matrix
        with pytest.raises(ValueError):
            s.write_documents([(doc("b.txt", ["DNS resolver"]), vecs(1, 5)), (doc("c.txt", ["two", "texts"]), vecs(1))])
        assert s.list_sources() == ["a.txt"]  # the whole batch rolled back, the good document too
        s.write_documents([(doc("b.txt", ["DNS resolver"]), vecs(1, 5))])
        after = s.search(request("DNS resolver", vecs(1, 5)[0]))
    assert len(before.candidates) == 1 and len(after.candidates) == 2
    assert after.candidates[0].dense.rank == 1 and after.candidates[0].lexical.rank == 1
