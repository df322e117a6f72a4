"""Tables of the per-user memory tiers (conversations, messages, profile).

Portable SQL only: it runs unchanged on SQLite and PostgreSQL. Timestamps are
epoch seconds in ``DOUBLE PRECISION`` (PostgreSQL's ``REAL`` is 4 bytes and
would round them to minutes); JSON is stored as ``TEXT``; message sequence
numbers are computed by :mod:`bara.memory.conversations`, never by the database.

Every table carries ``user_id`` and is indexed by it: each query binds it.
Notes and Q&A are not here: they are Store documents (collections ``notes`` and
``qa``, ``owner`` = user id) so they share hybrid search with the knowledge base.
"""

from __future__ import annotations

from bara.memory import episodic_names as en

_CONVERSATIONS = """CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    state TEXT NOT NULL DEFAULT '{}',
    turn_count INTEGER NOT NULL DEFAULT 0)"""

_MESSAGES = """CREATE TABLE messages (
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (conversation_id, seq))"""

_PROFILE = """CREATE TABLE profile (
    user_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    source_text TEXT NOT NULL DEFAULT '',
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (user_id, key))"""

# One row per stored batch of episodes (a dialogue session or a chat turn); the turns themselves are
# Store chunks in collection ``episodic`` (owner = user) so they share hybrid search.
_EPISODIC_SESSIONS = """CREATE TABLE episodic_sessions (
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    session TEXT NOT NULL,
    said_at DOUBLE PRECISION NOT NULL,
    date_text TEXT NOT NULL DEFAULT '',
    speakers TEXT NOT NULL DEFAULT '[]',
    mentions TEXT NOT NULL DEFAULT '[]',
    turns INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, conversation_id, session))"""

#: ``(name, statements)`` steps, registered with the store by :func:`register`.
#: The profile primary key (user_id, key) is its user_id index.
MEMORY_MIGRATIONS: list[tuple[str, list[str]]] = [
    ("0002_memory", [
        _CONVERSATIONS,
        "CREATE INDEX conversations_user ON conversations (user_id, updated_at)",
        _MESSAGES,
        "CREATE INDEX messages_user ON messages (user_id, conversation_id, seq)",
        _PROFILE,
    ]),
    ("0010_episodic", [_EPISODIC_SESSIONS]),
    # The gate's per-user name index (bara.memory.episodic_names); its backfill is a backend part.
    (en.STEP, en.TABLE),
]

#: ``(table, owner column)`` under PostgreSQL row-level security.
_MEMORY_TABLES = (("conversations", "user_id"), ("messages", "user_id"), ("profile", "user_id"))
# Episodic sessions: per-user dates and speakers of remembered dialogue.
_EPISODIC_TABLES = (("episodic_sessions", "user_id"),)
# The episodic name index: which names a user's other conversations hold.
_EPISODIC_NAME_TABLES = (("episodic_names", "user_id"),)


def register() -> None:
    """The ``bara.plugins`` entry point ``memory``: memory tiers, owner-keyed identity tables and their
    row-level security, registered with the store (see :mod:`bara.store.registry` for positions)."""
    from bara.memory import owner_keys as ok
    from bara.store.registry import OWNER_KEYS, SCHEMA, register_policies, register_step

    for rank, (name, statements) in enumerate(MEMORY_MIGRATIONS, start=10):
        register_step(name, statements, phase=SCHEMA, rank=rank)
    # 0015's backfill from the existing sessions (rank 12: the position its table part has above).
    register_step(en.STEP, en.SQLITE_BACKFILL, phase=SCHEMA, rank=12, part=10, backends=("sqlite",))
    register_step(en.STEP, en.PG_BACKFILL, phase=SCHEMA, rank=12, part=10, backends=("postgres",))
    register_policies("0003_pg_memory_rls", _MEMORY_TABLES, rank=10)
    register_policies("0011_pg_episodic_rls", _EPISODIC_TABLES, rank=11)
    register_policies("0016_pg_episodic_names_rls", _EPISODIC_NAME_TABLES, rank=12)
    register_step(ok.STEP, ok.IDENTITY_TABLES, phase=OWNER_KEYS, rank=30, part=0)
    register_step(ok.STEP, ok.SQLITE_REKEY, phase=OWNER_KEYS, rank=30, part=10, backends=("sqlite",))
    register_step(ok.STEP, ok.PG_REKEY, phase=OWNER_KEYS, rank=30, part=10, backends=("postgres",))
    # The serve tables exist only after 0005, so their policies follow it (same phase, next rank).
    register_policies("0006_pg_serve_rls", [(t, "user_id") for t in ok.RLS_TABLES], rank=31, phase=OWNER_KEYS)
    register_policies("0013_pg_memory_shared_read_only", _MEMORY_TABLES, rank=10, shared_read_only=True)
    register_policies("0014_pg_episodic_shared_read_only", _EPISODIC_TABLES, rank=11, shared_read_only=True)
    register_policies("0017_pg_episodic_names_shared_read_only", _EPISODIC_NAME_TABLES, rank=12,
                      shared_read_only=True)
