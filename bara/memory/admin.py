"""What ``bara memory inspect|query|forget`` (and any other surface) asks of a user's memory.

The records :class:`UserMemory` and :class:`Forgotten` are what :meth:`bara.app.Bara.memory` and
:meth:`bara.app.Bara.forget` return to every surface (CLI, HTTP, the privacy route of a turn); the
functions here shape them for the CLI. The searching ones take the program's :class:`~bara.app.Bara`
(typed here by the parts it reads, so this layer does not import ``bara.app``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional

from bara.errors import InputError
from bara.memory.conversations import ConversationInfo
from bara.memory.episodic_audit import EpisodicOverview
from bara.memory.notes import StoredNote
from bara.memory.profile import ProfileEntry
from bara.memory.qa import QAHit

TIERS = ("kb", "profile", "notes", "qa")


@dataclass(frozen=True)
class UserMemory:
    """Everything stored about one user, read after the pending learning writes are stored."""

    user: str
    profile: tuple[ProfileEntry, ...]
    notes: tuple[StoredNote, ...]
    qa: tuple[QAHit, ...]
    episodic: EpisodicOverview
    conversations: tuple[ConversationInfo, ...]

    @property
    def facts(self) -> dict[str, str]:
        """The profile as key -> value (what a turn reads)."""
        return {e.key: e.value for e in self.profile}


@dataclass(frozen=True)
class Forgotten:
    """How many rows of each kind one forget deleted; None: that kind was not asked to go."""

    profile: int = 0
    notes: int | None = None
    qa: int | None = None
    episodic: int | None = None
    traces: int | None = None  # the HTTP service's turn traces (and thread links) of the user's conversations
    conversations: int | None = None

    def to_json(self) -> dict[str, int]:
        """The counts by tier name (``profile``, ``notes``, ``qa``, ``episodic``, ``traces``,
        ``conversations``), only the kinds asked for: the one set of keys every surface reports."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


#: The program's :class:`~bara.app.Bara` (``store``, ``retriever``, ``settings``, the memory tiers and
#: ``flush``). Not imported: ``bara.app`` sits above this layer (and pyright does not match its
#: cached properties against a Protocol's).
MemoryOwner = Any


def inspect_report(bara: MemoryOwner, user: str, conversation: Optional[str]) -> dict[str, Any]:
    """A user's profile facts, notes, remembered Q&A, episodic memory and conversations (and one
    conversation's messages)."""
    seen: UserMemory = bara.memory(user)
    convs = bara.conversations
    report: dict[str, Any] = {
        "user": user,
        "profile": [{"key": e.key, "value": e.value, "from": e.source_text} for e in seen.profile],
        "notes": [{"kind": n.kind, "text": n.text, "conversation": n.conversation_id} for n in seen.notes],
        "qa": [{"question": q.question, "conversation": q.conversation_id} for q in seen.qa],
        "episodic": episodic_json(seen.episodic),
        "conversations": [{"id": c.id, "turns": c.turn_count, "messages": c.message_count} for c in seen.conversations],
    }
    if conversation is not None:
        if convs.get(user, conversation) is None:
            raise InputError(f"conversation {conversation!r} does not exist for user {user!r}; "
                             "run `bara memory inspect` to list the user's conversations")
        report["messages"] = [{"seq": m.seq, "role": m.role, "text": m.text}
                              for m in convs.history(user, conversation)]
        report["state"] = convs.load_state(user, conversation)
    return report


def episodic_json(seen: EpisodicOverview) -> dict[str, Any]:
    """The user's episodic memory as ``inspect_report`` and ``GET /api/memory`` show it (key ``"episodic"``,
    the tier's name, as ``DELETE /api/memory`` reports it): per conversation, most recently said first,
    its sessions, turns, dates, indexed names and latest remembered turns; what the
    ``memory_inspect_episodic_*`` bounds leave out is counted (``*_left_out``)."""
    return {"turns": seen.turns, "conversations_left_out": seen.conversations_left_out, "conversations": [
        {"conversation_id": c.conversation_id, "sessions": c.sessions, "turns": c.turns,
         "first_date": c.first_date, "last_date": c.last_date,
         "first_said_at": c.first_said_at, "last_said_at": c.last_said_at,
         "names": list(c.names), "names_left_out": c.names_left_out,
         "remembered": [{"session": t.session, "turn_id": t.turn_id, "speaker": t.speaker, "text": t.text}
                        for t in c.remembered],
         "remembered_left_out": c.remembered_left_out} for c in seen.conversations]}


def query_tier(bara: MemoryOwner, tier: str, text: str, user: str, k: int) -> list[dict[str, Any]]:
    """Search one tier the way the pipeline would (the user's rows only), as plain rows. An unknown tier or
    a k below 1 is an InputError (an unknown tier was searched as the profile)."""
    if tier not in TIERS:
        raise InputError(f"tier must be one of {', '.join(TIERS)}, not {tier!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a whole number of results, 1 or more, not {k!r}")
    bara.flush()
    if tier == "kb":
        out = bara.retriever.search(text, k=k, floor=bara.settings.floor_kb)
        return [{"id": h.id, "source": Path(h.chunk.source).name, "section": h.chunk.section,
                 "score": round(h.similarity, 4), "text": " ".join(h.chunk.text.split())[:200]} for h in out.hits]
    if tier == "notes":
        hits = bara.notes.search(user, text, k=k)
        return [{"kind": h.note.kind, "text": h.note.text, "score": round(h.score, 4)} for h in hits]
    if tier == "qa":
        found = bara.qa.search(user, text, k=k)
        return [{"question": h.question, "answer": h.answer[:200], "score": round(h.score, 4)} for h in found]
    words = set(text.lower().split())
    return [{"key": key, "value": value} for key, value in bara.profile.get(user).items()
            if words & set(f"{key} {value}".lower().replace("_", " ").split()) or text.strip() in ("", "*")]
