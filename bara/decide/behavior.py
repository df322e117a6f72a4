"""The behaviour engine: how this turn should feel, and whether retrieval is worth paying for.

It runs after intent classification and before the policy. It never picks a
memory tier (that is the policy's job); it picks a *mode* that may skip,
reduce or boost retrieval and shapes the answer's length and tone. Modes are
checked in a fixed order so exactly one wins and its reason code names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bara.settings import Settings
from bara.types import BEHAVIOR_MODES, BehaviorMode
from bara.understand.features import ContextFeatures, only_greets
from bara.understand.intent import IntentResult
from bara.understand.state import ConversationState

MODES = BEHAVIOR_MODES
_SOCIAL_KINDS = ("greeting", "thanks", "goodbye", "acknowledgement")


@dataclass(frozen=True)
class BehaviorDecision:
    """How to behave this turn; the policy turns it into concrete retrieval numbers."""

    mode: BehaviorMode = "standard"
    skip_retrieval: bool = False
    reduce_retrieval: bool = False
    boost_retrieval: bool = False
    k: int = 4  # knowledge-base chunks wanted (0 when skipped)
    floor_delta: float = 0.0  # added to the route's similarity floor
    answer_length: str = "normal"  # short | normal | long
    tone: str = "neutral"
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class _ModeSpec:
    effect: str  # "skip" | "reduce" | "boost" | "none"
    answer_length: str
    tone: str


_SPECS: dict[BehaviorMode, _ModeSpec] = {
    "standard": _ModeSpec("none", "normal", "neutral"),
    "greeting": _ModeSpec("skip", "short", "warm"),
    "testing_aware": _ModeSpec("skip", "short", "light"),
    "meta_aware": _ModeSpec("skip", "short", "transparent"),
    "frustration_recovery": _ModeSpec("boost", "normal", "empathetic"),
    "repetition_aware": _ModeSpec("boost", "normal", "clarifying"),
    "rapid_fire": _ModeSpec("reduce", "short", "concise"),
    "exploratory": _ModeSpec("boost", "long", "engaged"),
}

_Check = Callable[[IntentResult, ContextFeatures, ConversationState, Settings], "str | None"]


def _unrecognised(intent: IntentResult) -> bool:
    """No rule found a question: the intent is a fallback guess, not a finding."""
    return intent.source == "rule:default" or (intent.source == "prototype" and intent.intent == "general")


def _social(intent: IntentResult, f: ContextFeatures, s, cfg) -> str | None:
    if intent.chitchat in _SOCIAL_KINDS:
        return "greeting_loop_skip" if s.greeting_streak >= 2 else f"{intent.chitchat}_skip"
    if f.is_greeting and _unrecognised(intent) and not f.has_question_mark and only_greets(
            f.normalized, cfg.gate_greeting_rest_max_words):
        return "greeting_skip"  # "hello, nice to meet you": social, unless it goes on to ask for something
    return None


def _testing(intent: IntentResult, f: ContextFeatures, s, cfg) -> str | None:
    if intent.chitchat == "testing":
        return "testing_skip"
    return "low_entropy_skip" if f.low_entropy and _unrecognised(intent) else None


def _meta(intent: IntentResult, f, s, cfg) -> str | None:
    return "meta_skip" if intent.chitchat == "meta" else None


def _frustration(intent, f, s: ConversationState, cfg) -> str | None:
    return "frustration_boost" if s.tone == "frustrated" else None


def _repetition(intent, f, s: ConversationState, cfg) -> str | None:
    return "repetition_boost" if s.repetition_count >= 1 else None


def _rapid_fire(intent, f, s: ConversationState, cfg: Settings) -> str | None:
    return "rapid_fire_reduce" if s.rapid_fire_streak >= cfg.gate_rapid_fire_streak else None


def _exploratory(intent, f, s: ConversationState, cfg: Settings) -> str | None:
    return "exploratory_boost" if s.exploratory_switches >= cfg.gate_exploratory_switches else None


#: First match wins: social turns first (cheapest to get right), then recovery, then rhythm.
_CHECKS: tuple[tuple[BehaviorMode, _Check], ...] = (
    ("greeting", _social), ("testing_aware", _testing), ("meta_aware", _meta),
    ("frustration_recovery", _frustration), ("repetition_aware", _repetition),
    ("rapid_fire", _rapid_fire), ("exploratory", _exploratory),
)


def select_mode(intent: IntentResult, features: ContextFeatures, state: ConversationState,
                settings: Settings) -> tuple[BehaviorMode, str]:
    """(mode, reason) of the first check that fires; ("standard", "standard") otherwise."""
    for mode, check in _CHECKS:
        reason = check(intent, features, state, settings)
        if reason is not None:
            return mode, reason
    return "standard", "standard"


def _retrieval_numbers(effect: str, settings: Settings) -> tuple[int, float]:
    """k and floor delta for an effect; reduce/boost move both so the change is real."""
    if effect == "skip":
        return 0, 0.0
    if effect == "reduce":
        return max(1, settings.k - settings.gate_reduce_k_delta), settings.gate_reduce_floor_delta
    if effect == "boost":
        return settings.k + settings.gate_boost_k_delta, -settings.gate_boost_floor_delta
    return settings.k, 0.0


def largest_k(settings: Settings) -> int:
    """The most knowledge-base chunks any mode asks for: what a search started before the gate has
    decided must cover (a turn's lexical arm runs ahead while its message is encoded)."""
    return max(_retrieval_numbers(spec.effect, settings)[0] for spec in _SPECS.values())


def _answer_length(spec: _ModeSpec, features: ContextFeatures) -> tuple[str, tuple[str, ...]]:
    if spec.answer_length == "normal" and "elaboration" in features.followup_signals:
        return "long", ("behavior:elaboration_long",)
    return spec.answer_length, ()


def decide_behavior(intent: IntentResult, features: ContextFeatures, state: ConversationState,
                    settings: Settings) -> BehaviorDecision:
    """Pick the behaviour mode for this turn.

    ``state`` is the state *after* this turn (``update_state`` already applied),
    so streaks and repetition counts include the message being answered.
    """
    mode, reason = select_mode(intent, features, state, settings)
    spec = _SPECS[mode]
    k, floor_delta = _retrieval_numbers(spec.effect, settings)
    length, extra = _answer_length(spec, features)
    return BehaviorDecision(
        mode=mode, skip_retrieval=spec.effect == "skip", reduce_retrieval=spec.effect == "reduce",
        boost_retrieval=spec.effect == "boost", k=k, floor_delta=floor_delta,
        answer_length=length, tone=spec.tone, reasons=(f"behavior:{reason}",) + extra,
    )
