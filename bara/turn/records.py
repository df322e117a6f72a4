"""The records between the stages of one gated turn (``bara.turn.gated``): the loaded input, what the
gate computed that retrieval reuses, what the tiers returned, and the turn's result."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

import numpy as np

from bara.memory.conversations import StoredMessage
from bara.memory.episodic import EpisodeHit
from bara.memory.episodic_attribution import Attribution
from bara.memory.notes import NoteHit
from bara.memory.qa import QAHit
from bara.memory.vectors import HistoryTopic
from bara.app import TurnResult
from bara.turn.steps import LexicalGuess, TurnFacts
from bara.turn.skeleton import TurnStart
from bara.types import RetrievalOutcome, Utterance
from bara.understand.sanitize import CleanInput
from bara.understand.state import ConversationState
from bara.understand.topic import TopicDecision


@dataclass(frozen=True)
class TurnInput:
    """A sanitised message with its conversation loaded: the input of every later stage."""

    user_id: str
    clean: CleanInput
    conversation_id: str
    turn: int
    messages: tuple[StoredMessage, ...]  # the recent window, oldest first
    state: ConversationState | None
    profile: Mapping[str, str]
    facts: TurnFacts  # what the message states, extracted once: shown by the generator, then stored
    head: tuple[StoredMessage, ...] = ()  # the conversation's opening messages the window no longer holds
    also: Mapping[str, Any] = field(default_factory=dict)  # answers of the first reads (``Loaded.also``)

    @classmethod
    def of(cls, s: TurnStart, profile: Mapping[str, str], max_concepts: int) -> "TurnInput":
        c = s.loaded
        return cls(s.user_id, s.clean, c.conversation_id, c.turn, c.messages, c.state, profile,
                   TurnFacts.of(s.clean.text, max_concepts), c.head, c.also)

    @cached_property
    def history(self) -> tuple[Utterance, ...]:
        """The loaded messages as utterances, built once per turn (the gate, the rules and
        the prompt all read them)."""
        return tuple(Utterance(m.role, m.text) for m in self.messages)


@dataclass(frozen=True)
class Retrieved:
    """What the opened tiers returned (empty for closed tiers); ``query`` is "" when nothing ran."""

    query: str = ""
    rewritten: bool = False
    kb: RetrievalOutcome | None = None
    notes: tuple[NoteHit, ...] = ()
    qa: tuple[QAHit, ...] = ()
    vector: np.ndarray | None = None  # the dense query: the topic vector (message + carried topic)
    message_vector: np.ndarray | None = None  # of the user's own words, when the turn embedded them
    searched: bool = False  # any tier was searched this turn
    episodes: tuple[EpisodeHit, ...] = ()
    attribution: Attribution | None = None  # whose event the best episodes tell


@dataclass(frozen=True)
class Seen:
    """What the gate computed that retrieval reuses: the message vector (None when the turn cannot
    search), the topic before this turn, whether the message depends on it, and the guessed query."""

    vector: np.ndarray | None
    prior: HistoryTopic
    topic: TopicDecision
    guess: LexicalGuess


__all__ = ["Retrieved", "Seen", "TurnInput", "TurnResult"]  # TurnResult lives with Bara.turn, which returns it
