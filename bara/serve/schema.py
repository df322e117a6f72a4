"""Tables of the HTTP service: API keys (hashes only), stored turn traces, message-history threads.

Portable SQL (SQLite and PostgreSQL). Every table is per-user: its primary key and every unique
constraint start with ``user_id``, so a Citus cluster can distribute it by owner (docs/scaling.md).
API keys are looked up by hash before the user is known, through a plain (non-unique) index.

``0005_owner_keys`` also re-keys the tables that predate this rule: ``conversations`` by
``(user_id, id)``, ``messages`` by ``(user_id, conversation_id, seq)`` (so two users may hold the same
conversation id without ever meeting), ``funds_transactions`` by ``(user_id, id)``, and on PostgreSQL
``documents`` / ``chunks`` by ``(owner, id)``. SQLite's ``documents`` / ``chunks`` keep their rowid
keys: FTS5 rows point at the chunk rowid, which a composite key would stop aliasing, and Citus (the
reason for the rule) is a PostgreSQL plan.
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

# PostgreSQL only: the store's tables. SQLite keeps its rowid ids there (FTS5 rows are keyed by the
# chunk's rowid, which a composite key would stop aliasing); Citus is a PostgreSQL plan.
_PG_REKEY_STORE = [
    "ALTER TABLE chunks DROP CONSTRAINT chunks_doc_id_fkey",
    "ALTER TABLE documents DROP CONSTRAINT documents_pkey",
    "ALTER TABLE documents ADD PRIMARY KEY (owner, id)",
    "ALTER TABLE chunks DROP CONSTRAINT chunks_pkey",
    "ALTER TABLE chunks ADD PRIMARY KEY (owner, id)",
    "ALTER TABLE chunks ADD FOREIGN KEY (owner, doc_id) REFERENCES documents(owner, id) ON DELETE CASCADE",
    "CREATE INDEX documents_id ON documents (id)",
    "CREATE INDEX chunks_id ON chunks (id)",
]

_PG_REKEY_FUNDS = [
    "ALTER TABLE funds_transactions DROP CONSTRAINT funds_transactions_pkey",
    "ALTER TABLE funds_transactions ADD PRIMARY KEY (user_id, id)",
]

_SQLITE_REKEY_FUNDS = [
    "ALTER TABLE funds_transactions RENAME TO funds_transactions_0102",
    """CREATE TABLE funds_transactions (
        id TEXT NOT NULL,
        user_id TEXT NOT NULL REFERENCES funds_users (id),
        scheme_code TEXT NOT NULL REFERENCES funds_schemes (scheme_code),
        date TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('SIP', 'LUMPSUM', 'REDEMPTION')),
        amount DOUBLE PRECISION NOT NULL CHECK (amount > 0),
        units DOUBLE PRECISION NOT NULL CHECK (units > 0),
        nav DOUBLE PRECISION NOT NULL CHECK (nav > 0),
        memo TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (user_id, id))""",
    "INSERT INTO funds_transactions SELECT id, user_id, scheme_code, date, kind, amount, units, nav, memo"
    " FROM funds_transactions_0102",
    "DROP TABLE funds_transactions_0102",
    "CREATE INDEX funds_tx_user ON funds_transactions (user_id, scheme_code, date)",
]

STEP = "0005_owner_keys"


def serve_migrations(backend: str, funds: bool = True) -> list[tuple[str, list[str]]]:
    """``(name, statements)`` for ``backend`` ("sqlite" or "postgres"); ``funds``: the funds tables exist."""
    if backend == "postgres":
        rekey = [*_PG_REKEY, *_PG_REKEY_STORE, *(_PG_REKEY_FUNDS if funds else [])]
    else:
        rekey = [*_SQLITE_REKEY, *(_SQLITE_REKEY_FUNDS if funds else [])]
    return [(STEP, [*_SERVE, *rekey])]


def _policy(table: str) -> tuple[str, ...]:
    from bara.store.pg_sql import policy

    return policy(table, "user_id")


#: Row-level security on the per-user serve tables (keys are found by hash before any scope is set,
#: under the trusted ``*`` scope, so they carry no policy).
SERVE_RLS: tuple[str, ...] = (*_policy("serve_traces"), *_policy("serve_threads"))
