"""Ordered, named schema steps. A step, once released, is never edited: add a new one.

Core steps are backend-specific (full-text and vector storage differ); domain
steps (memory tiers, funds) are portable SQL shared by every backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Migration:
    name: str  # "0001_core": the number fixes the order, the name says what it does
    statements: tuple[str, ...]


SQLITE_CORE = Migration("0001_core", (
    """CREATE TABLE documents (
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        collection TEXT NOT NULL,
        source TEXT NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        content_hash TEXT NOT NULL,
        meta TEXT NOT NULL DEFAULT '{}',
        updated_at REAL NOT NULL,
        UNIQUE (owner, collection, source))""",
    """CREATE TABLE chunks (
        id INTEGER PRIMARY KEY,
        doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        owner TEXT NOT NULL,
        collection TEXT NOT NULL,
        ordinal INTEGER NOT NULL,
        text TEXT NOT NULL,
        section TEXT NOT NULL DEFAULT '',
        title TEXT NOT NULL DEFAULT '',
        start_char INTEGER NOT NULL,
        end_char INTEGER NOT NULL,
        content_hash TEXT NOT NULL,
        embedding BLOB NOT NULL)""",
    "CREATE INDEX chunks_scope ON chunks (owner, collection)",
    "CREATE INDEX chunks_doc ON chunks (doc_id)",
    "CREATE INDEX documents_owner ON documents (owner, collection)",
    # scope holds one token per (owner, collection): filtering through the index itself is twice as
    # fast as joining chunks (bench: 3.2 vs 6.9 ms on SciFact); its bm25 weight is 0.
    "CREATE VIRTUAL TABLE chunks_fts USING fts5 (body, heading, scope, tokenize = 'unicode61')",
    """CREATE TABLE scope_generation (
        owner TEXT NOT NULL, collection TEXT NOT NULL, gen INTEGER NOT NULL,
        PRIMARY KEY (owner, collection))""",
))


#: Shared key/value facts about the store itself (no per-user data), e.g. which embedder made its
#: vectors (bara/memory/reembed.py). Portable SQL: the same step on SQLite and PostgreSQL.
STORE_META = Migration("0201_store_meta", (
    """CREATE TABLE store_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL)""",
    # A store that already holds vectors when this step runs predates the stamp: round 1's default
    # embedder made them (bara.memory.reembed.LEGACY_KEY). A new store is stamped by its first writer.
    """INSERT INTO store_meta (key, value, updated_at)
        SELECT 'embedder', 'all-MiniLM-L6-v2-onnx-int8@256', 0 WHERE EXISTS (SELECT 1 FROM chunks)""",
))


def _domain_steps() -> list[Migration]:
    """Portable steps owned by the domain packages, in release order."""
    steps: list[Migration] = []
    for loader in _DOMAIN_LOADERS:
        steps.extend(loader())
    return steps


def _memory_steps() -> list[Migration]:
    try:
        from bara.memory.schema import MEMORY_MIGRATIONS
    except ImportError:
        return []
    return [Migration(name, tuple(sql)) for name, sql in MEMORY_MIGRATIONS]


def _funds_steps() -> list[Migration]:
    try:
        from bara.domains.funds.schema import FUNDS_MIGRATIONS
    except ImportError:
        return []
    return [Migration(name, tuple(sql)) for name, sql in FUNDS_MIGRATIONS]


def _store_meta_steps() -> list[Migration]:
    return [STORE_META]


_DOMAIN_LOADERS: tuple[Callable[[], list[Migration]], ...] = (_memory_steps, _funds_steps, _store_meta_steps)


def _serve_steps(backend: str) -> list[Migration]:
    """API keys, stored traces, history threads, and owner-first keys on every per-user table."""
    try:
        from bara.serve.schema import serve_migrations
    except ImportError:
        return []
    funds = any(s.name.startswith("0102_funds") for s in _funds_steps())
    return [Migration(name, tuple(sql)) for name, sql in serve_migrations(backend, funds)]


def sqlite_migrations() -> list[Migration]:
    return [SQLITE_CORE, *_domain_steps(), *_serve_steps("sqlite")]


def postgres_migrations(dim: int = 384) -> list[Migration]:
    """PostgreSQL core (tsvector + ``vector(dim)`` + HNSW + row-level security), the portable domain
    steps, then row-level security on the memory tables and on portfolio transactions. ``dim`` is fixed when the schema is created."""
    from bara.store.pg_sql import (CORE_SHARED_READ_ONLY, EPISODIC_RLS, EPISODIC_SHARED_READ_ONLY, FUNDS_RLS,
                                   FUNDS_SHARED_READ_ONLY, MEMORY_RLS, MEMORY_SHARED_READ_ONLY, core_statements)

    steps = [Migration("0001_core", core_statements(dim)), *_domain_steps()]
    if any(s.name == "0002_memory" for s in steps):
        steps.append(Migration("0003_pg_memory_rls", MEMORY_RLS))
    if any(s.name == "0010_episodic" for s in steps):
        steps.append(Migration("0011_pg_episodic_rls", EPISODIC_RLS))
    if any(s.name.startswith("0102_funds") for s in steps):
        steps.append(Migration("0103_pg_funds_rls", FUNDS_RLS))
    serve = _serve_steps("postgres")
    if serve:
        from bara.serve.schema import SERVE_RLS

        steps += [*serve, Migration("0006_pg_serve_rls", SERVE_RLS)]
    # A user's scope may read shared rows but never write one (harden-faults).
    steps.append(Migration("0012_pg_core_shared_read_only", CORE_SHARED_READ_ONLY))
    if any(s.name == "0003_pg_memory_rls" for s in steps):
        steps.append(Migration("0013_pg_memory_shared_read_only", MEMORY_SHARED_READ_ONLY))
    if any(s.name == "0011_pg_episodic_rls" for s in steps):
        steps.append(Migration("0014_pg_episodic_shared_read_only", EPISODIC_SHARED_READ_ONLY))
    if any(s.name == "0103_pg_funds_rls" for s in steps):
        steps.append(Migration("0104_pg_funds_shared_read_only", FUNDS_SHARED_READ_ONLY))
    return steps
