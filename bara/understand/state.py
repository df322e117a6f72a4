"""Conversation state the behaviour engine reads: tone, repetition, rhythm, exploration.

The state is a frozen value; ``update_state`` returns a new one per turn so a
caller can persist, diff or replay it. ``to_dict``/``from_dict`` give a
versioned JSON-safe form that tolerates missing or unknown keys, so stored
states survive upgrades.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from bara.settings import Settings
from bara.text.stopwords import TOPIC_SWITCH_STOPWORDS
from bara.understand.features import ContextFeatures, words_of
from bara.understand.intent import IntentResult

STATE_VERSION = 1
TONES = ("neutral", "frustrated", "positive")


@dataclass(frozen=True)
class ConversationState:
    """Per-conversation counters and streaks; every field has a safe default."""

    turn_count: int = 0
    tone: str = "neutral"
    recent_queries: tuple[str, ...] = ()
    repetition_count: int = 0
    testing_count: int = 0
    rapid_fire_streak: int = 0
    intent_history: tuple[str, ...] = ()
    exploratory_switches: int = 0
    greeting_streak: int = 0
    frustration_streak: int = 0
    followup_streak: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict with a ``version`` key (tuples become lists)."""
        out: dict[str, Any] = {"version": STATE_VERSION}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, settings: Settings | None = None) -> "ConversationState":
        """Rebuild from ``to_dict`` output; missing, unknown or ill-typed keys fall back to defaults."""
        data = data or {}
        defaults = cls()
        window = (settings or Settings()).state_history_window
        values = {f.name: _coerce(data.get(f.name), getattr(defaults, f.name), window)
                  for f in dataclasses.fields(cls)}
        if values["tone"] not in TONES:
            values["tone"] = "neutral"
        return cls(**values)


def _coerce(value: Any, default: Any, window: int) -> Any:
    if isinstance(default, tuple):
        if not isinstance(value, (list, tuple)):
            return default
        return tuple(str(v) for v in value)[-window:]
    if isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return value if ok else default
    return value if isinstance(value, type(default)) else default


@lru_cache(maxsize=4096)
def _content_words(normalized: str) -> frozenset[str]:
    return frozenset(w for w in words_of(normalized) if w not in TOPIC_SWITCH_STOPWORDS)


def jaccard(a: str, b: str) -> float:
    """Overlap of content-word sets; 0.0 when either side has no content words."""
    wa, wb = _content_words(a), _content_words(b)
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def _is_repeat(q: str, recent: tuple[str, ...], threshold: float) -> bool:
    return any(q == prev or jaccard(q, prev) >= threshold for prev in recent)


def _is_topic_switch(features: ContextFeatures, intent: str, recent: tuple[str, ...],
                     threshold: float, window: int) -> bool:
    """A fresh question unrelated to the recent ones (by vector when known, else by words)."""
    if intent not in ("general", "knowledge_base") or features.is_followup or not recent:
        return False
    if features.topic_similarity is not None:
        return features.topic_similarity < threshold
    return all(jaccard(features.normalized, prev) == 0.0 for prev in recent[-window:])


def _tone(features: ContextFeatures, repetitions: int, frustrated_at: int) -> str:
    if features.tone_signal == "frustrated" or repetitions >= frustrated_at:
        return "frustrated"
    return features.tone_signal


def _streak(previous: int, condition: bool) -> int:
    return previous + 1 if condition else 0


def _switches(previous: int, switched: bool, is_query: bool) -> int:
    """Switches accumulate and decay one per on-topic query; chit-chat leaves them alone."""
    if switched:
        return previous + 1
    return max(0, previous - 1) if is_query else previous


def _window(items: tuple[str, ...], item: str | None, size: int) -> tuple[str, ...]:
    return items[-size:] if item is None else (items + (item,))[-size:]


def update_state(state: ConversationState | None, message: str, intent_result: IntentResult,
                 features: ContextFeatures, settings: Settings | None = None) -> ConversationState:
    """The state after this turn; ``state`` itself is never modified.

    ``message`` is accepted for symmetry with the other stages; the state uses
    ``features.normalized`` so every stage sees the same spelling.
    """
    state = state or ConversationState()
    cfg = settings or Settings()
    q, intent, kind = features.normalized, intent_result.intent, intent_result.chitchat
    is_query = intent != "chitchat" and bool(q)
    repeated = is_query and _is_repeat(q, state.recent_queries, cfg.gate_repetition_similarity)
    repetitions = _streak(state.repetition_count, repeated)
    tone = _tone(features, repetitions, cfg.state_repeats_mean_frustration)
    switched = _is_topic_switch(features, intent, state.recent_queries, cfg.gate_topic_switch_similarity,
                                cfg.state_topic_window)
    size = cfg.state_history_window
    short = is_query and features.word_count <= cfg.gate_short_query_words
    return ConversationState(
        turn_count=state.turn_count + 1, tone=tone,
        recent_queries=_window(state.recent_queries, q if is_query else None, size),
        repetition_count=repetitions,
        testing_count=state.testing_count + (kind in ("testing", "meta")),
        rapid_fire_streak=_streak(state.rapid_fire_streak, short),
        intent_history=_window(state.intent_history, intent, size),
        exploratory_switches=_switches(state.exploratory_switches, switched, is_query),
        greeting_streak=_streak(state.greeting_streak, kind == "greeting"),
        frustration_streak=_streak(state.frustration_streak, tone == "frustrated"),
        followup_streak=_streak(state.followup_streak, features.is_followup or intent == "continuation"),
    )


def note_ungated_turn(state: ConversationState | None, normalized: str,
                      settings: Settings | None = None) -> ConversationState:
    """The state after a turn the gate did not see (an ``always`` turn in a conversation that mixes
    modes, e.g. per-request modes in ``bara serve``): counted, and its message kept among the recent
    queries, so the next gated turn still notices a repeated question; streaks and the intent history
    are left as they were, since no intent was decided."""
    state = state or ConversationState()
    size = (settings or Settings()).state_history_window
    return dataclasses.replace(state, turn_count=state.turn_count + 1,
                               recent_queries=_window(state.recent_queries, normalized or None, size))
