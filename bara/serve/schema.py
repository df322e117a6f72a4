"""Tables of the HTTP service: API keys (hashes only), stored turn traces, message-history threads.

Portable SQL (SQLite and PostgreSQL). Every table is per-user: its primary key and every unique
constraint start with ``user_id``, so a Citus cluster can distribute it by owner (docs/scaling.md).
API keys are looked up by hash before the user is known, through a plain (non-unique) index.

``0005_owner_keys`` also re-keys the memory tables that predate this rule: ``conversations`` by
``(user_id, id)`` and ``messages`` by ``(user_id, conversation_id, seq)``, so two users may hold the
same conversation id without ever meeting (the id space is per user, like every other row).
"""

from __future__ import annotations

_KEYS = """CREATE TABLE serve_keys (
    user_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    key_hash TEXT NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL,
    revoked_at DOUBLE PRECISION,
    PRIMARY KEY (user_id, key_id))"""

_TRACES = """CREATE TABLE serve_traces (
    user_id TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    mode TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    trace TEXT NOT NULL,
    PRIMARY KEY (user_id, trace_id))"""

_THREADS = """CREATE TABLE serve_threads (
    user_id TEXT NOT NULL,
    thread_hash TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (user_id, thread_hash))"""

SERVE_TABLES = ("serve_keys", "serve_traces", "serve_threads")

_SERVE = [
    _KEYS,
    "CREATE INDEX serve_keys_hash ON serve_keys (key_hash)",
    _TRACES,
    "CREATE INDEX serve_traces_turns ON serve_traces (user_id, conversation_id, turn)",
    _THREADS,
]

# SQLite cannot alter a primary key: move the old tables aside, create the owner-keyed ones, copy.
_SQLITE_REKEY = [
    "ALTER TABLE messages RENAME TO messages_0002",
    "ALTER TABLE conversations RENAME TO conversations_0002",
    """CREATE TABLE conversations (
        id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        state TEXT NOT NULL DEFAULT '{}',
        turn_count INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (user_id, id))""",
    """CREATE TABLE messages (
        conversation_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        text TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        meta TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (user_id, conversation_id, seq),
        FOREIGN KEY (user_id, conversation_id) REFERENCES conversations(user_id, id) ON DELETE CASCADE)""",
    "INSERT INTO conversations SELECT id, user_id, created_at, updated_at, state, turn_count FROM conversations_0002",
    "INSERT INTO messages SELECT conversation_id, user_id, seq, role, text, created_at, meta FROM messages_0002",
    "DROP TABLE messages_0002",
    "DROP TABLE conversations_0002",
    "CREATE INDEX conversations_user ON conversations (user_id, updated_at)",
    "CREATE INDEX messages_user ON messages (user_id, conversation_id, seq)",
]

# PostgreSQL alters the keys in place (row-level security policies stay attached).
_PG_REKEY = [
    "ALTER TABLE messages DROP CONSTRAINT messages_conversation_id_fkey",
    "ALTER TABLE messages DROP CONSTRAINT messages_pkey",
    "ALTER TABLE conversations DROP CONSTRAINT conversations_pkey",
    "ALTER TABLE conversations ADD PRIMARY KEY (user_id, id)",
    "ALTER TABLE messages ADD PRIMARY KEY (user_id, conversation_id, seq)",
    "ALTER TABLE messages ADD FOREIGN KEY (user_id, conversation_id) REFERENCES conversations(user_id, id)"
    " ON DELETE CASCADE",
]

STEP = "0005_owner_keys"


def serve_migrations(backend: str) -> list[tuple[str, list[str]]]:
    """``(name, statements)`` for ``backend`` ("sqlite" or "postgres")."""
    rekey = _PG_REKEY if backend == "postgres" else _SQLITE_REKEY
    return [(STEP, [*_SERVE, *rekey])]


def _policy(table: str) -> tuple[str, ...]:
    from bara.store.pg_sql import policy

    return policy(table, "user_id")


#: Row-level security on the per-user serve tables (keys are found by hash before any scope is set,
#: under the trusted ``*`` scope, so they carry no policy).
SERVE_RLS: tuple[str, ...] = (*_policy("serve_traces"), *_policy("serve_threads"))
