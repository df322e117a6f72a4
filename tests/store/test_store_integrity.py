"""A writer reads every page (quick_check) before it writes unless the file is exactly as a writer
that passed the check left it at a clean close: a crash, an outside write or a damaged page checks
again, and a damaged file is still refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from bara.errors import StoreError
from bara.settings import Settings
from bara.store import open_store
from bara.store.sqlite import SQLiteStore
from bara.store.sqlite_files import clean_mark
from bara.types import Chunk, Document

import numpy as np


def _write(store) -> None:
    text = "alpha beta gamma " * 40
    doc = Document(source="a.md", content_hash=f"h{np.random.default_rng().integers(1 << 30)}", title="a",
                   chunks=(Chunk(text=text, source="a.md", ordinal=0, start=0, end=len(text)),))
    store.write_document(doc, np.ones((1, 384), dtype=np.float32) / np.sqrt(384))


def _damage(db: Path) -> None:
    """Overwrite the middle third of the file (the 100-byte header stays intact)."""
    size = db.stat().st_size
    with db.open("r+b") as fh:
        fh.seek(size // 3)
        fh.write(bytes([0xA5]) * (size // 3))


@pytest.fixture()
def db(tmp_path) -> Path:
    path = tmp_path / "kb.db"
    with open_store(str(path), settings=Settings()) as store:
        _write(store)
    return path


def test_a_clean_close_lets_the_next_writer_skip_the_page_check(db):
    assert clean_mark(str(db)).exists()
    with open_store(str(db), settings=Settings()) as store:
        assert store.integrity_checked is False
        assert not clean_mark(str(db)).exists()  # this writer may change the file
        _write(store)
    with open_store(str(db), settings=Settings()) as store:
        assert store.integrity_checked is False


def test_a_writer_that_never_closed_makes_the_next_one_check(db):
    crashed = open_store(str(db), settings=Settings())  # stands for a process killed while it held the file
    try:
        with open_store(str(db), settings=Settings()) as store:
            assert store.integrity_checked is True
    finally:
        crashed.close()


def test_a_page_damaged_after_a_clean_close_is_still_refused(db):
    _damage(db)
    with pytest.raises(StoreError, match="damaged"):
        open_store(str(db), settings=Settings())


def test_always_checks_on_every_open(db):
    with open_store(str(db), settings=Settings(store_integrity_check="always")) as store:
        assert store.integrity_checked is True
    with SQLiteStore(db) as store:  # the class on its own keeps checking every time
        assert store.integrity_checked is True


def test_a_mark_that_does_not_match_checks_again(db):
    clean_mark(str(db)).write_text("1 2 3 4")
    with open_store(str(db), settings=Settings()) as store:
        assert store.integrity_checked is True


def test_a_bulk_load_ends_with_a_clean_close(tmp_path):
    """``write_documents`` (the bulk path of a large build, bench/scale_build.py) in a store opened as every
    command opens it: its close leaves the mark, so the next writer skips reading every page."""
    path = tmp_path / "bulk.db"
    text = "delta epsilon zeta " * 30
    docs = [(Document(source=f"d{i}.md", content_hash=f"h{i}", title="d",
                      chunks=(Chunk(text=f"{text} {i}", source=f"d{i}.md", ordinal=0, start=0, end=len(text)),)),
             np.ones((1, 384), dtype=np.float32) / np.sqrt(384)) for i in range(50)]
    with open_store(str(path), settings=Settings()) as store:
        store.write_documents(docs[:25])
        store.write_documents(docs[25:])
    assert clean_mark(str(path)).exists()
    with open_store(str(path), settings=Settings()) as store:
        assert store.integrity_checked is False
        assert store.count_chunks() == 50


def test_a_read_only_connection_between_two_writers_does_not_cost_a_page_check(db):
    """A ``mode=ro`` connection (another process reading, a backup tool) leaves an empty WAL where the
    clean close had removed it: nothing the file holds changed, so the next writer still skips the check."""
    import sqlite3

    wal = Path(str(db) + "-wal")
    with SQLiteStore(db, mode="read") as store:  # bara's own read commands, for good measure
        assert store.count_chunks() == 1
    assert not wal.exists()
    reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    assert reader.execute("SELECT count(*) FROM chunks").fetchone() == (1,)
    reader.close()
    assert wal.exists() and wal.stat().st_size == 0  # what SQLite leaves (the reason for the rule)
    with open_store(str(db), settings=Settings()) as store:
        assert store.integrity_checked is False
        _write(store)
    clean_mark(str(db)).write_text(" ".join(map(str, [db.stat().st_size, 1, -1, -1])))  # a changed file
    with open_store(str(db), settings=Settings()) as store:
        assert store.integrity_checked is True
