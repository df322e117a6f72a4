"""Ordered, named schema steps. A step, once released, is never edited: add a new one.

Core steps are backend-specific (full-text and vector storage differ). Every other step is
registered by its owner through :mod:`bara.store.registry` (memory tiers, identity tables, domains
such as funds: portable SQL shared by every backend, plus PostgreSQL row-level security); the store
names no other package's tables.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bara.store.registry import (OWNER_KEYS, SCHEMA, SHARED_READ_ONLY, register_policies, register_step,
                                 steps_for)


#: Where a store says it is upgrading its schema (``bara`` commands print it on stderr).
log = logging.getLogger("bara.store")


def announce_upgrade(location: str, applied: list[str], pending: list[str]) -> None:
    """Say, before it starts, that a store an earlier bara made (``applied`` steps) is about to take the
    ``pending`` ones: a step may copy every row (``0202`` moves users' full-text rows, ~25,000 rows/s), so a
    large store's first command after an upgrade can take seconds to minutes, once. A new store's steps
    (nothing applied yet) are its creation, not announced."""
    if applied and pending:
        log.warning("%s: applying schema step%s %s once, after a bara upgrade; a large store may take a minute. "
                    "Let it finish: an interrupted step is rolled back and runs again next time.",
                    location, "s" if len(pending) > 1 else "", ", ".join(pending))


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


#: Users' full-text rows get their own FTS5 table (SQLite only): FTS5's ``bm25()`` takes
#: its statistics from its whole table, so users' memory in ``chunks_fts`` moved the knowledge base's
#: scores for everyone. Same columns and tokenizer; every row whose owner is not shared moves, rowid kept.
SQLITE_MEMORY_FTS = Migration("0202_sqlite_memory_fts", (
    "CREATE VIRTUAL TABLE memory_fts USING fts5 (body, heading, scope, tokenize = 'unicode61')",
    """INSERT INTO memory_fts (rowid, body, heading, scope)
        SELECT f.rowid, f.body, f.heading, f.scope FROM chunks_fts f JOIN chunks c ON c.id = f.rowid
        WHERE c.owner <> '' ORDER BY f.rowid""",
    "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE owner <> '')",
))


#: The store's part of ``0005_owner_keys`` (PostgreSQL only): its tables keyed by ``(owner, id)``. SQLite
#: keeps its rowid ids there (FTS5 rows are keyed by the chunk's rowid, which a composite key would stop
#: aliasing); Citus is a PostgreSQL plan.
_PG_REKEY_STORE = (
    "ALTER TABLE chunks DROP CONSTRAINT chunks_doc_id_fkey",
    "ALTER TABLE documents DROP CONSTRAINT documents_pkey",
    "ALTER TABLE documents ADD PRIMARY KEY (owner, id)",
    "ALTER TABLE chunks DROP CONSTRAINT chunks_pkey",
    "ALTER TABLE chunks ADD PRIMARY KEY (owner, id)",
    "ALTER TABLE chunks ADD FOREIGN KEY (owner, doc_id) REFERENCES documents(owner, id) ON DELETE CASCADE",
    "CREATE INDEX documents_id ON documents (id)",
    "CREATE INDEX chunks_id ON chunks (id)",
)


def _register_store_steps() -> None:
    """The store's own registered steps (idempotent); the core step is not registered: it always comes first."""
    register_step(STORE_META.name, STORE_META.statements, phase=SCHEMA, rank=90)
    register_step(SQLITE_MEMORY_FTS.name, SQLITE_MEMORY_FTS.statements, phase=SCHEMA, rank=90, backends=("sqlite",))
    register_step("0005_owner_keys", _PG_REKEY_STORE, phase=OWNER_KEYS, rank=30, part=15, backends=("postgres",))
    # The tsvector stays in the row (the embedding goes to TOAST first), so ranking a match reads no
    # TOAST; rows written before keep their layout until `VACUUM FULL chunks` (docs/postgres.md).
    register_step("0030_pg_chunks_tsv_inline", ("ALTER TABLE chunks ALTER COLUMN tsv SET STORAGE MAIN",),
                  phase=SHARED_READ_ONLY, rank=99, backends=("postgres",))  # after every released step
    # Per-scope document frequencies for the bounded full-text arm (bara.store.pg_lexical), backfilled.
    from bara.store.pg_lexical import step_statements

    register_step("0031_pg_chunk_terms", step_statements(), phase=SHARED_READ_ONLY, rank=99, backends=("postgres",))
    # ... kept per term only for scopes of pg_lexical_terms_min_rows rows or more (existing scopes stay kept).
    from bara.store.pg_lexical import lazy_step_statements

    register_step("0032_pg_chunk_terms_lazy", lazy_step_statements(), phase=SHARED_READ_ONLY, rank=99,
                  backends=("postgres",))
    # ... and a small private scope's vectors outside the HNSW graph (a turn's writes link no graph node).
    from bara.store.pg_flat import step_statements as flat_step_statements

    register_step("0033_pg_flat_vectors", flat_step_statements(), phase=SHARED_READ_ONLY, rank=99,
                  backends=("postgres",))
    # A user's scope may read shared rows but never write one (harden-faults).
    register_policies("0012_pg_core_shared_read_only", (("documents", "owner"), ("chunks", "owner")), rank=0,
                      shared_read_only=True)


def _registered(backend: str) -> list[Migration]:
    _register_store_steps()
    return [Migration(name, statements) for name, statements in steps_for(backend)]


def sqlite_migrations() -> list[Migration]:
    return [SQLITE_CORE, *_registered("sqlite")]


def postgres_migrations(dim: int = 384) -> list[Migration]:
    """PostgreSQL core (tsvector + ``vector(dim)`` + HNSW + row-level security), then every registered
    step: portable tables, row-level security on the per-user tables, owner keys, shared-read-only
    policies. ``dim`` is fixed when the schema is created."""
    from bara.store.pg_sql import core_statements

    return [Migration("0001_core", core_statements(dim)), *_registered("postgres")]
