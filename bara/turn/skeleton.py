"""The one turn skeleton every assistant runs: sanitise, the empty turn, open, lock, load.

``run_turn`` does the preamble both the gated pipeline (``bara.turn.gated``) and the agent
session run before their own work, in one order: sanitise the message (timed, its reason
codes recorded); an empty message is answered without touching the store; otherwise open
the conversation, take its turn lock and the user's store scope, load the recent window and
state (timed as ``load``) and hand a :class:`TurnStart` to the assistant's ``body``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar

from bara.memory.conversations import Conversations, StoredMessage, not_found
from bara.prompts import EMPTY_INPUT
from bara.settings import Settings
from bara.store.base import Read, read_all
from bara.trace import StoredRecord, TurnRecorder, TurnTrace
from bara.types import SHARED, Utterance
from bara.understand.sanitize import CleanInput, sanitize
from bara.understand.state import ConversationState

R = TypeVar("R")


class ScopedStore(Protocol):
    def scoped(self, owners: Sequence[str]) -> AbstractContextManager[None]: ...


@dataclass(frozen=True)
class Loaded:
    """A conversation as a turn finds it: its id ("" when nothing is stored), this turn's number,
    the recent window (oldest first) and the state the last turn left (None on the first turn)."""

    conversation_id: str
    turn: int
    messages: tuple[StoredMessage, ...]
    state: ConversationState | None
    head: tuple[StoredMessage, ...] = ()  # the opening messages when the window no longer holds them
    also: Mapping[str, Any] = field(default_factory=dict)  # the answers of the assistant's first reads, by key

    @property
    def history(self) -> tuple[Utterance, ...]:
        return tuple(Utterance(m.role, m.text) for m in self.messages)


@dataclass(frozen=True)
class TurnStart:
    """What the skeleton hands an assistant: the user, the sanitised message and the loaded conversation."""

    user_id: str
    clean: CleanInput
    loaded: Loaded


def load_conversation(conversations: Conversations, settings: Settings, user_id: str, cid: str,
                      also: Mapping[str, Read] | None = None) -> Loaded:
    """The recent window (``pipeline_history_messages``), the turn number and the stored state, and the
    answers of ``also`` (the assistant's other first reads: the profile...), all in one read of the store."""
    if not cid:
        return Loaded("", 1, (), None, also=read_all(conversations.store, also or {}))
    window = settings.pipeline_history_messages
    view = conversations.turn_view(user_id, cid, window, settings.rewrite_head_messages, also)  # one read
    if view is None:  # not the user's (unknown, another user's, or deleted since it was opened)
        raise not_found(cid, user_id)
    turn, messages, head = view.turn_count + 1, view.messages, view.head
    state = ConversationState.from_dict(view.state, settings) if turn > 1 else None
    return Loaded(cid, turn, messages, state, head, view.also)


def empty_trace(user_id: str, cid: str, mode: str, rec: TurnRecorder, behavior_mode: str = "") -> TurnTrace:
    """The trace of an empty message: nothing searched, nothing stored."""
    rec.reason("persist:nothing_stored")
    return TurnTrace(turn=0, user=user_id, mode=mode, conversation_id=cid, intent="empty",
                     intent_source="rule:empty", behavior_mode=behavior_mode, route="none", answer=EMPTY_INPUT,
                     generator="none", latency_ms=rec.latency(), reasons=rec.reasons, stored=StoredRecord(turn=False),
                     timeline=rec.timeline())


def run_turn(settings: Settings, store: ScopedStore, conversations: Conversations, user_id: str,
             message: str | bytes, conversation_id: str | None, *,
             body: Callable[[TurnStart, TurnRecorder], R],
             empty: Callable[[str, TurnRecorder], R],
             open_conversation: Callable[[str, str | None], str] | None = None,
             also: Callable[[str], Mapping[str, Read]] | None = None) -> R:
    """Run the preamble, then ``body`` under the conversation's turn lock and the user's scope.

    ``empty(cid, rec)`` answers an empty message; ``open_conversation`` (default
    ``conversations.open``) resolves the id (the agent's evaluation runs store nothing: "" then);
    ``also(cid)``: the body's own first reads, sent with the conversation's (``Loaded.also``).
    """
    rec = TurnRecorder()
    with rec.stage("sanitize"):
        clean = sanitize(message, settings.max_query_chars)
    rec.reason(*clean.reasons)
    if not clean.text:
        return empty(conversation_id or "", rec)
    if open_conversation is None and conversation_id is not None:
        cid = conversation_id  # whether it is the user's is the first read of load_conversation, under the lock
    else:
        cid = (open_conversation or conversations.open)(user_id, conversation_id)
    with conversations.turn_lock(cid or "-"), store.scoped((SHARED, user_id)):
        with rec.stage("load"):
            loaded = load_conversation(conversations, settings, user_id, cid, also(cid) if also else None)
        return body(TurnStart(user_id, clean, loaded), rec)
