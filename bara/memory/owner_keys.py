"""Owner-keyed identity tables every store carries: API keys (hashes only), stored turn traces,
message-history threads, and the step that re-keys the older per-user tables by owner.

They live with memory, not with the HTTP service, because every store needs them whichever surface
opened it (CLI, MCP, serve, tests); :func:`bara.memory.schema.register` registers them with the store.
Each table's statement lives with the repository that owns its SQL (:mod:`bara.memory.api_keys`,
:mod:`bara.memory.service_records`).
Portable SQL (SQLite and PostgreSQL). Every table is per-user: its primary key and every unique
constraint start with ``user_id``, so a Citus cluster can distribute it by owner (docs/scaling.md).
API keys are looked up by hash before the user is known, through a plain (non-unique) index.

``0005_owner_keys`` also re-keys the tables that predate this rule: ``conversations`` by
``(user_id, id)``, ``messages`` by ``(user_id, conversation_id, seq)`` (so two users may hold the same
conversation id without ever meeting). The owners of the other tables add their own parts to the same
step: ``funds_transactions`` by ``(user_id, id)`` (bara.domains.funds.schema) and, on PostgreSQL,
``documents`` / ``chunks`` by ``(owner, id)`` (bara.store.migrations). SQLite's ``documents`` /
``chunks`` keep their rowid keys: FTS5 rows point at the chunk rowid, which a composite key would stop
aliasing, and Citus (the reason for the rule) is a PostgreSQL plan.
"""

from __future__ import annotations

from bara.memory.api_keys import KEYS_TABLE as _KEYS
from bara.memory.service_records import THREADS_TABLE as _THREADS
from bara.memory.service_records import TRACES_TABLE as _TRACES

SERVE_TABLES = ("serve_keys", "serve_traces", "serve_threads")

#: Part 0 of ``0005_owner_keys``: the identity tables themselves.
IDENTITY_TABLES = [
    _KEYS,
    "CREATE INDEX serve_keys_hash ON serve_keys (key_hash)",
    _TRACES,
    "CREATE INDEX serve_traces_turns ON serve_traces (user_id, conversation_id, turn)",
    _THREADS,
]

#: Part 10 of ``0005_owner_keys`` (memory's own tables).
# SQLite cannot alter a primary key: move the old tables aside, create the owner-keyed ones, copy.
SQLITE_REKEY = [
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
PG_REKEY = [
    "ALTER TABLE messages DROP CONSTRAINT messages_conversation_id_fkey",
    "ALTER TABLE messages DROP CONSTRAINT messages_pkey",
    "ALTER TABLE conversations DROP CONSTRAINT conversations_pkey",
    "ALTER TABLE conversations ADD PRIMARY KEY (user_id, id)",
    "ALTER TABLE messages ADD PRIMARY KEY (user_id, conversation_id, seq)",
    "ALTER TABLE messages ADD FOREIGN KEY (user_id, conversation_id) REFERENCES conversations(user_id, id)"
    " ON DELETE CASCADE",
]

STEP = "0005_owner_keys"

#: Tables of the HTTP service that carry row-level security (keys are found by hash before any scope
#: is set, under the trusted ``*`` scope, so they carry no policy).
RLS_TABLES = ("serve_traces", "serve_threads")
