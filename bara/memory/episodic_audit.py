"""What a user can see of their episodic memory (``bara memory inspect``, ``GET /api/memory``).

Per conversation the episodic tier (:mod:`bara.memory.episodic`) remembers: how many sessions (a
chat turn is one) and turns it holds, the dates of its first and last session, the names it indexed
for the gate (``episodic_names``, most often named first) and the remembered turns themselves, as
stored (``[8 May 2023] Caroline: ...``). Everything is bounded, the rest counted: conversations most
recently said first, each with its latest turns (shown oldest first) and its names, at most the
``memory_inspect_episodic_*`` settings. Every statement binds the user (and the chunks' owner), so
one user's report never reads another's rows, with or without the database's row-level security.
"""

from __future__ import annotations

from dataclasses import dataclass

from bara.store.base import SqlRunner


@dataclass(frozen=True)
class RememberedTurn:
    """One remembered turn, as stored."""

    session: str
    turn_id: str
    speaker: str
    text: str  # as stored: "[date] Speaker: words (resolved dates)"


@dataclass(frozen=True)
class EpisodeConversation:
    """One conversation's episodic memory: counts, dates, names and its latest turns."""

    conversation_id: str
    sessions: int
    turns: int
    first_said_at: float
    last_said_at: float
    first_date: str  # "8 May 2023"; "" when the session had no date
    last_date: str
    names: tuple[str, ...]
    names_left_out: int
    remembered: tuple[RememberedTurn, ...]  # the latest turns, oldest first

    @property
    def remembered_left_out(self) -> int:
        return max(0, self.turns - len(self.remembered))


@dataclass(frozen=True)
class EpisodicOverview:
    """A user's episodic memory within the bounds, with what they left out counted."""

    conversations: tuple[EpisodeConversation, ...]  # most recently said first
    conversations_left_out: int
    turns: int  # every remembered turn of the user, shown or not


@dataclass(frozen=True)
class Bounds:
    """The ``memory_inspect_episodic_*`` settings: conversations listed, turns and names shown per conversation."""

    conversations: int
    turns: int
    names: int


def overview(runner: SqlRunner, user_id: str, bounds: Bounds, collection: str) -> EpisodicOverview:
    """The user's episodic memory (its turns are chunks of ``collection``), conversation by conversation,
    within ``bounds``."""
    rows = runner.query("SELECT COUNT(DISTINCT conversation_id), COALESCE(SUM(turns), 0) FROM episodic_sessions"
                        " WHERE user_id=?", (user_id,))
    total, turns = (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)
    listed = runner.query("SELECT conversation_id, COUNT(*), SUM(turns), MIN(said_at), MAX(said_at)"
                          " FROM episodic_sessions WHERE user_id=? GROUP BY conversation_id"
                          " ORDER BY MAX(said_at) DESC, conversation_id LIMIT ?", (user_id, bounds.conversations))
    convs = tuple(_conversation(runner, user_id, str(c), int(n), int(t), float(lo), float(hi), bounds, collection)
                  for c, n, t, lo, hi in listed)
    return EpisodicOverview(convs, max(0, total - len(convs)), turns)


def _conversation(runner: SqlRunner, user_id: str, conversation_id: str, sessions: int, turns: int,
                  first: float, last: float, bounds: Bounds, collection: str) -> EpisodeConversation:
    first_date, last_date = _dates(runner, user_id, conversation_id, first, last)
    names, named = _names(runner, user_id, conversation_id, bounds.names)
    latest = _latest_turns(runner, user_id, conversation_id, bounds.turns, collection)
    return EpisodeConversation(conversation_id, sessions, turns, first, last, first_date, last_date, names,
                               max(0, named - len(names)), latest)


def _dates(runner: SqlRunner, user_id: str, conversation_id: str, first: float, last: float) -> tuple[str, str]:
    """The date texts of the conversation's first and last sessions (by ``said_at``)."""
    rows = runner.query("SELECT date_text FROM episodic_sessions WHERE user_id=? AND conversation_id=?"
                        " AND said_at IN (?, ?) ORDER BY said_at, session", (user_id, conversation_id, first, last))
    return (str(rows[0][0] or ""), str(rows[-1][0] or "")) if rows else ("", "")


def _names(runner: SqlRunner, user_id: str, conversation_id: str, limit: int) -> tuple[tuple[str, ...], int]:
    """The conversation's indexed names, most sessions first (at most ``limit``), and how many it has."""
    rows = runner.query("SELECT name FROM episodic_names WHERE user_id=? AND conversation_id=?"
                        " ORDER BY sessions DESC, name LIMIT ?", (user_id, conversation_id, limit))
    count = runner.query("SELECT COUNT(*) FROM episodic_names WHERE user_id=? AND conversation_id=?",
                         (user_id, conversation_id))
    return tuple(str(n) for (n,) in rows), int(count[0][0]) if count else 0


def _latest_turns(runner: SqlRunner, user_id: str, conversation_id: str, limit: int,
                  collection: str) -> tuple[RememberedTurn, ...]:
    """The conversation's last ``limit`` stored turns, oldest first (a session's turns in their order)."""
    if limit <= 0:
        return ()
    rows = runner.query(
        "SELECT s.session, c.section, c.title, c.text FROM episodic_sessions s"
        " JOIN documents d ON d.owner = s.user_id AND d.collection = ?"
        " AND d.source = 'ep:' || s.conversation_id || ':' || s.session"
        " JOIN chunks c ON c.doc_id = d.id AND c.owner = s.user_id"
        " WHERE s.user_id=? AND s.conversation_id=? ORDER BY s.said_at DESC, s.session DESC, c.ordinal DESC LIMIT ?",
        (collection, user_id, conversation_id, limit))
    return tuple(RememberedTurn(str(s), str(sec), str(title), str(text)) for s, sec, title, text in reversed(rows))
