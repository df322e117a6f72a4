"""The conversation tier: per-user conversations, their messages and their gate state.

Scoping: every query binds the caller's ``user_id``. A conversation that belongs
to another user behaves exactly like one that does not exist (``get`` returns
None, ``history`` is empty); conversation ids are per user (the key is ``(user_id, id)``, migration
``0005_owner_keys``), so two users may hold the same id without ever meeting.

Ordering: a message's ``seq`` is ``max(seq) + 1`` computed inside a write
transaction that first updates the conversation row. On SQLite the transaction
is ``BEGIN IMMEDIATE`` (one writer per file); on PostgreSQL the ``UPDATE`` takes
the conversation's row lock. Either way two appends, from two threads or two
processes, never read the same maximum. :meth:`Conversations.turn_lock`
additionally serialises whole turns (read state, answer, record) in one process.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping
from weakref import WeakValueDictionary

from bara.errors import InputError, UnknownConversationError
from bara.identity import require_user_id
from bara.memory.service_records import forget_service_records
from bara.store.base import Read, SqlRunner, parsed, statements

ROLES = frozenset({"user", "assistant", "system"})

_MESSAGE_COLUMNS = "conversation_id, user_id, seq, role, text, created_at, meta"
# A turn's two messages in one statement: their seqs follow the conversation's last (read in the same
# statement, inside the transaction whose UPDATE of the conversation row orders concurrent writers).
_INSERT_TURN = (f"INSERT INTO messages ({_MESSAGE_COLUMNS}) SELECT ?, ?, n.seq + m.k, m.role, m.text, ?, m.meta"
                " FROM (SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM messages WHERE user_id=? AND conversation_id=?) n,"
                " (SELECT 0 AS k, 'user' AS role, ? AS text, ? AS meta UNION ALL SELECT 1, 'assistant', ?, ?) m"
                " WHERE EXISTS (SELECT 1 FROM conversations c WHERE c.user_id=? AND c.id=?)"  # else no rows: no FK error
                " RETURNING seq")
# A turn's update of its conversation row (the lock that orders writers, before the insert reads MAX(seq)),
# sent with the insert in one pipeline: RETURNING says whether the row is there (the user's).
_TOUCH_TURN = ("UPDATE conversations SET updated_at=?, turn_count=turn_count+1, state=? WHERE user_id=? AND id=?"
               " RETURNING 1")
_INFO_COLUMNS = ("c.id, c.user_id, c.created_at, c.updated_at, c.turn_count,"
                 " (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id AND m.user_id = c.user_id)")


@dataclass(frozen=True)
class ConversationInfo:
    id: str
    user_id: str
    created_at: float
    updated_at: float
    turn_count: int  # user messages recorded
    message_count: int


@dataclass(frozen=True)
class StoredMessage:
    conversation_id: str
    user_id: str
    seq: int  # 1-based, gap-free within a conversation
    role: str  # "user" | "assistant" | "system"
    text: str
    created_at: float
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TurnView:
    """A conversation as a turn reads it (:meth:`Conversations.turn_view`)."""

    turn_count: int  # user messages recorded
    state: dict[str, Any]  # the saved gate state ({} when none)
    messages: tuple[StoredMessage, ...]  # the recent window, oldest first
    head: tuple[StoredMessage, ...]  # the opening messages the window no longer holds
    also: Mapping[str, Any] = field(default_factory=dict)  # the parsed answers of the ``also`` reads, by key


class _TurnLock:
    """A weak-referenceable holder, so locks of idle conversations are freed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


class Conversations:
    """Conversations of every user in one Store; share one instance per process for ``turn_lock``."""

    def __init__(self, store: SqlRunner):
        self.store = store
        self._locks: WeakValueDictionary[str, _TurnLock] = WeakValueDictionary()
        self._locks_guard = threading.Lock()

    # ------------------------------------------------------------------ conversations
    def create(self, user_id: str, conversation_id: str | None = None) -> str:
        """Create (or, for the same user, reuse) a conversation; returns its id."""
        require_user_id(user_id)
        cid = conversation_id or uuid.uuid4().hex
        now = time.time()
        with self.store.transaction():  # ids are per user (key (user_id, id)): another user's never collide
            self.store.execute(
                "INSERT INTO conversations (id, user_id, created_at, updated_at) VALUES (?,?,?,?)"
                " ON CONFLICT (user_id, id) DO NOTHING", (cid, user_id, now, now))
        return cid

    def open(self, user_id: str, conversation_id: str | None = None, create: bool = False) -> str:
        """An existing conversation of ``user_id``, or a new one (``None``, or ``create=True``)."""
        require_user_id(user_id)
        if conversation_id is None or create:
            return self.create(user_id, conversation_id)
        if not self.exists(user_id, conversation_id):
            raise not_found(conversation_id, user_id)
        return conversation_id

    def exists(self, user_id: str, conversation_id: str) -> bool:
        """Whether ``user_id`` has this conversation (one indexed row read, no message count)."""
        require_user_id(user_id)
        return bool(self.store.query("SELECT 1 FROM conversations WHERE user_id=? AND id=?",
                                     (user_id, conversation_id)))

    def get(self, user_id: str, conversation_id: str) -> ConversationInfo | None:
        require_user_id(user_id)
        rows = self.store.query(f"SELECT {_INFO_COLUMNS} FROM conversations c WHERE c.user_id=? AND c.id=?",
                                (user_id, conversation_id))
        return ConversationInfo(*rows[0]) if rows else None

    def list(self, user_id: str) -> list[ConversationInfo]:
        """The user's conversations, most recently updated first."""
        require_user_id(user_id)
        rows = self.store.query(f"SELECT {_INFO_COLUMNS} FROM conversations c WHERE c.user_id=?"
                                " ORDER BY c.updated_at DESC, c.id", (user_id,))
        return [ConversationInfo(*r) for r in rows]

    def delete(self, user_id: str, conversation_id: str | None = None) -> int:
        """Delete one conversation (or all of the user's) with its messages and the service's traces and thread
        links of it; returns how many conversations."""
        require_user_id(user_id)
        where, params = "user_id=?", [user_id]
        if conversation_id is not None:
            where, params = where + " AND id=?", params + [conversation_id]
        with self.store.transaction():
            forget_service_records(self.store, user_id, conversation_id)
            self.store.execute(f"DELETE FROM messages WHERE user_id=? AND conversation_id IN"
                               f" (SELECT id FROM conversations WHERE {where})", (user_id, *params))
            return self.store.execute(f"DELETE FROM conversations WHERE {where}", params)

    # ----------------------------------------------------------------------- messages
    def append(self, user_id: str, conversation_id: str, role: str, text: str,
               meta: Mapping[str, Any] | None = None) -> int:
        """Append one message; returns its seq. Raises InputError for unknown conversations."""
        require_user_id(user_id)
        with self.store.transaction():
            return self._append(user_id, conversation_id, role, text, meta, time.time())

    def _append(self, user_id: str, conversation_id: str, role: str, text: str,
                meta: Mapping[str, Any] | None, now: float) -> int:
        if role not in ROLES:
            raise InputError(f"message role {role!r} is not one of {sorted(ROLES)}: the caller must fix it")
        self._touch(user_id, conversation_id, now, 1 if role == "user" else 0)
        seq = self._next_seq(user_id, conversation_id)
        self.store.execute(f"INSERT INTO messages ({_MESSAGE_COLUMNS}) VALUES (?,?,?,?,?,?,?)",
                           (conversation_id, user_id, seq, role, text, now, _dumps(meta or {}, "meta")))
        return seq

    def _next_seq(self, user_id: str, conversation_id: str) -> int:
        """The seq of the conversation's next message (inside the write transaction that touched its row)."""
        return int(self.store.query("SELECT COALESCE(MAX(seq), 0) + 1 FROM messages"
                                    " WHERE user_id=? AND conversation_id=?", (user_id, conversation_id))[0][0])

    def _touch(self, user_id: str, conversation_id: str, now: float, turns: int,
               state: str | None = None) -> None:
        """Update the conversation row first: it is the lock that orders concurrent writers."""
        sets, params = "updated_at=?, turn_count=turn_count+?", [now, turns]
        if state is not None:
            sets, params = sets + ", state=?", params + [state]
        changed = self.store.execute(f"UPDATE conversations SET {sets} WHERE user_id=? AND id=?",
                                     (*params, user_id, conversation_id))
        if changed != 1:
            raise _unknown(conversation_id)

    def history(self, user_id: str, conversation_id: str, limit: int | None = None) -> list[StoredMessage]:
        """Messages oldest first; with ``limit``, only the last ``limit`` of them."""
        require_user_id(user_id)
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE user_id=? AND conversation_id=? ORDER BY seq DESC"
        params: tuple = (user_id, conversation_id)
        if limit is not None:
            sql, params = sql + " LIMIT ?", (*params, max(0, int(limit)))
        return [_message(r) for r in reversed(self.store.query(sql, params))]

    def history_head(self, user_id: str, conversation_id: str, limit: int) -> list[StoredMessage]:
        """The first ``limit`` messages, oldest first: a conversation's opening (its topic anchor)."""
        require_user_id(user_id)
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE user_id=? AND conversation_id=? ORDER BY seq LIMIT ?"
        return [_message(r) for r in self.store.query(sql, (user_id, conversation_id, max(0, int(limit))))]

    # -------------------------------------------------------------------------- state
    def load_state(self, user_id: str, conversation_id: str) -> dict[str, Any]:
        """The saved gate state; {} when none was saved or the conversation is not the user's."""
        require_user_id(user_id)
        rows = self.store.query("SELECT state FROM conversations WHERE user_id=? AND id=?",
                                (user_id, conversation_id))
        return json.loads(rows[0][0]) if rows and rows[0][0] else {}

    def turn_view(self, user_id: str, conversation_id: str, window: int, head: int,
                  also: Mapping[str, Read] | None = None) -> TurnView | None:
        """What a turn starts from, in one read of the store: the user messages recorded, the saved gate
        state, the last ``window`` messages and, of the first ``head``, those before that window (the
        opening it lost); and the answers of ``also`` (other tiers' reads: the profile...), sent with them.
        None when the conversation is not the user's."""
        require_user_id(user_id)
        also = also or {}
        key, reads = (user_id, conversation_id), [("SELECT turn_count, state FROM conversations WHERE user_id=? AND id=?",
                                                   (user_id, conversation_id))]
        if window:
            reads += [(f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE user_id=? AND conversation_id=?"
                       " ORDER BY seq DESC LIMIT ?", (*key, window)),
                      (f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE user_id=? AND conversation_id=?"
                       " ORDER BY seq LIMIT ?", (*key, max(0, head)))]
        found = self.store.query_many([*reads, *statements(also)])
        if not found[0]:
            return None
        (turns, state), = found[0]
        last = tuple(_message(r) for r in reversed(found[1])) if window else ()
        first = last[0].seq if last else 1
        opening = tuple(m for m in map(_message, found[2]) if m.seq < first) if window else ()
        return TurnView(int(turns), json.loads(state) if state else {}, last, opening, parsed(also, found[len(reads):]))

    def save_state(self, user_id: str, conversation_id: str, state: Mapping[str, Any]) -> None:
        require_user_id(user_id)
        encoded = _dumps(state, "state")
        with self.store.transaction():
            self._touch(user_id, conversation_id, time.time(), 0, encoded)

    def record_turn(self, user_id: str, conversation_id: str, user_text: str, assistant_text: str,
                    state: Mapping[str, Any], meta: Mapping[str, Any] | None = None,
                    user_meta: Mapping[str, Any] | None = None) -> tuple[int, int]:
        """Store the user message (with ``user_meta``, e.g. its cached vectors), the assistant message
        (with ``meta``) and the state atomically.

        Returns the two seqs. Any failure rolls everything back: nothing of the turn is stored.
        """
        require_user_id(user_id)
        encoded, metas = _dumps(state, "state"), (_dumps(user_meta or {}, "meta"), _dumps(meta or {}, "meta"))
        with self.store.transaction():  # the row lock (and state), then both messages: one round trip
            now = time.time()
            touched, rows = self.store.query_many([
                (_TOUCH_TURN, (now, encoded, user_id, conversation_id)),
                (_INSERT_TURN, (conversation_id, user_id, now, user_id, conversation_id,
                                user_text, metas[0], assistant_text, metas[1], user_id, conversation_id))])
            if len(touched) != 1:  # not the user's conversation: nothing was inserted
                raise _unknown(conversation_id)
        seq = min(int(r[0]) for r in rows)
        return seq, seq + 1

    @contextmanager
    def turn_lock(self, conversation_id: str) -> Iterator[None]:
        """Serialise turns on one conversation within this process (the DB covers other processes)."""
        with self._locks_guard:
            holder = self._locks.get(conversation_id)
            if holder is None:
                holder = self._locks[conversation_id] = _TurnLock()
        with holder.lock:
            yield


def not_found(conversation_id: str, user_id: str) -> UnknownConversationError:
    """The one answer for an id the user cannot use, whether unknown or another user's (reveals neither)."""
    return UnknownConversationError(f"conversation {conversation_id!r} does not exist for user {user_id!r}: pass "
                                    "an id from `bara memory inspect`, or start a new conversation (leave the id "
                                    "out, or `bara chat --new`)")


def _unknown(conversation_id: str) -> UnknownConversationError:
    return UnknownConversationError(f"conversation {conversation_id!r} does not exist for this user: "
                                    "the caller must create it first (Conversations.create)")


def _dumps(value: Mapping[str, Any], what: str) -> str:
    try:
        return json.dumps(dict(value), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InputError(f"conversation {what} must be JSON-serialisable; the caller passed: {exc}") from exc


def _message(row: tuple) -> StoredMessage:
    cid, uid, seq, role, text, created, meta = row
    return StoredMessage(cid, uid, int(seq), role, text, float(created), json.loads(meta) if meta else {})

