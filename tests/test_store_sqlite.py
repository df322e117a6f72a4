"""SQLite backend: the shared contract plus what is specific to a file on disk."""

from __future__ import annotations

import sqlite3

import pytest

from bara.errors import StoreError
from bara.store.migrations import Migration, sqlite_migrations
from bara.store.sqlite import SQLiteStore
from store_contract import StoreContract, doc, vecs


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
