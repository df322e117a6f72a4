"""API keys: random secrets shown once, stored only as SHA-256 hashes, one user (and admin flag) each.

A key is ``bara_<key_id>_<secret>`` with a 32-byte random secret (``secrets.token_urlsafe``); the
stored hash is ``sha256(key)``. An unsalted hash is enough here: the secret has 256 bits of entropy,
so no dictionary or rainbow table applies (unlike passwords). Lookups go through an index on the hash.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from bara.errors import InputError
from bara.store.base import SqlRunner

PREFIX = "bara_"
SECRET_BYTES = 32

#: The keys table (created by the ``0005_owner_keys`` step, :mod:`bara.memory.owner_keys`).
KEYS_TABLE = """CREATE TABLE serve_keys (
    user_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    key_hash TEXT NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL,
    revoked_at DOUBLE PRECISION,
    PRIMARY KEY (user_id, key_id))"""


@dataclass(frozen=True)
class ApiKey:
    """A key's stored facts (never the secret)."""

    user_id: str
    key_id: str
    admin: bool
    created_at: float
    revoked_at: float | None = None


@dataclass(frozen=True)
class NewKey:
    key: str  # shown once
    info: ApiKey


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()


def check_user_id(user_id: str) -> str:
    """A user id is any non-blank text without control characters, at most 200 characters."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise InputError("--user must be a non-empty user id (not blank or whitespace)")
    if user_id != user_id.strip() or len(user_id) > 200 or any(ord(c) < 32 for c in user_id):
        raise InputError("--user must have no leading/trailing spaces or control characters and at most "
                         "200 characters")
    return user_id


class KeyStore:
    """Create, list, revoke and verify API keys in a Store's ``serve_keys`` table."""

    def __init__(self, store: SqlRunner):
        self.store = store

    def create(self, user_id: str, admin: bool = False) -> NewKey:
        check_user_id(user_id)
        key_id = secrets.token_hex(6)
        key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(SECRET_BYTES)}"
        now = time.time()
        with self.store.transaction():
            self.store.execute("INSERT INTO serve_keys (user_id, key_id, key_hash, admin, created_at)"
                               " VALUES (?,?,?,?,?)", (user_id, key_id, hash_key(key), int(admin), now))
        return NewKey(key, ApiKey(user_id, key_id, admin, now))

    def list(self, user_id: str | None = None) -> list[ApiKey]:
        sql = "SELECT user_id, key_id, admin, created_at, revoked_at FROM serve_keys"
        params: tuple = ()
        if user_id is not None:
            sql, params = sql + " WHERE user_id=?", (user_id,)
        rows = self.store.query(sql + " ORDER BY created_at, key_id", params)
        return [ApiKey(r[0], r[1], bool(r[2]), float(r[3]), None if r[4] is None else float(r[4])) for r in rows]

    def revoke(self, key_id: str) -> int:
        """Revoke by key id (the ``bara_<key_id>_`` part, or a whole key); returns how many keys."""
        if key_id.startswith(PREFIX) and key_id.count("_") >= 2:
            key_id = key_id[len(PREFIX):].split("_", 1)[0]
        with self.store.transaction():
            return self.store.execute("UPDATE serve_keys SET revoked_at=? WHERE key_id=? AND revoked_at IS NULL",
                                      (time.time(), key_id))

    def probe(self) -> None:
        """A one-row read of the keys table: raises what the store raises when it does not answer."""
        self.store.query("SELECT 1 FROM serve_keys LIMIT 1")

    def verify(self, key: str) -> ApiKey | None:
        """The live key behind ``key``, or None (unknown, malformed or revoked)."""
        if not key.startswith(PREFIX) or len(key) > 200:
            return None
        rows = self.store.query("SELECT user_id, key_id, admin, created_at, key_hash FROM serve_keys"
                                " WHERE key_hash=? AND revoked_at IS NULL", (hash_key(key),))
        for r in rows:
            if secrets.compare_digest(r[4], hash_key(key)):
                return ApiKey(r[0], r[1], bool(r[2]), float(r[3]))
        return None
