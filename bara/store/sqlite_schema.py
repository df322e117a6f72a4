"""Schema steps of a SQLite store: apply the missing named migrations in order, each in its own
transaction, refuse a file a newer bara wrote, and use a read-only file only as it is."""

from __future__ import annotations

import sqlite3
import time
from contextlib import AbstractContextManager
from typing import Callable

from bara.errors import StoreError
from bara.store.migrations import Migration, announce_upgrade
from bara.store.sqlite_files import APPLICATION_ID


def migrate(conn: sqlite3.Connection, location: str, read_only: bool,
            transaction: Callable[[], AbstractContextManager[None]], steps: list[Migration]) -> None:
    if read_only:
        _check_read_only_schema(conn, location, steps)
        return
    conn.execute("CREATE TABLE IF NOT EXISTS bara_migrations (seq INTEGER PRIMARY KEY,"
                 " name TEXT NOT NULL UNIQUE, applied_at REAL NOT NULL)")
    applied = [r[0] for r in conn.execute("SELECT name FROM bara_migrations ORDER BY seq")]
    known = [s.name for s in steps]
    unknown = [n for n in applied if n not in known]
    if unknown:
        raise StoreError(f"{location} has schema steps this bara does not know ({', '.join(unknown)}): "
                         "it was written by a newer bara. Upgrade bara, or point --db at another file.")
    pending = [step for step in steps if step.name not in applied]
    announce_upgrade(location, applied, [step.name for step in pending])
    for step in pending:
        with transaction():
            for sql in step.statements:
                conn.execute(sql)
            conn.execute("INSERT INTO bara_migrations (name, applied_at) VALUES (?, ?)", (step.name, time.time()))
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def _check_read_only_schema(conn: sqlite3.Connection, location: str, steps: list[Migration]) -> None:
    """A read-only file is used as it is; it must not need a schema step."""
    has_table = conn.execute("SELECT 1 FROM sqlite_master WHERE name='bara_migrations'").fetchone()
    applied = {r[0] for r in conn.execute("SELECT name FROM bara_migrations")} if has_table else set()
    missing = [s.name for s in steps if s.name not in applied]
    if missing:
        raise StoreError(f"{location} is read-only and needs schema steps ({', '.join(missing)}): "
                         "make it writable (chmod u+w) and run any bara command once, or use another --db")
