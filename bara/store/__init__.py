"""Stores: the protocol and its backends. ``open_store`` picks one from a location."""

from __future__ import annotations

from bara.errors import ConfigError
from bara.store.base import SqlRunner, Store

__all__ = ["Store", "SqlRunner", "open_store"]


def open_store(location: str) -> Store:
    """A SQLite file path (or ``:memory:``) opens the embedded store."""
    if location.startswith(("postgresql://", "postgres://")):
        raise ConfigError("the PostgreSQL backend is not part of this bara release yet; "
                          "pass --db with a SQLite file path")
    from bara.store.sqlite import SQLiteStore

    return SQLiteStore(location)
