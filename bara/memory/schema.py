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

#: ``(name, statements)`` steps picked up by :mod:`bara.store.migrations`.
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
]
