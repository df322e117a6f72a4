"""The policy engine: which memory tiers to open for this turn, and how much to take.

Intent picks a base route with its own relevance floor; the behaviour decision
may then skip, shrink or widen knowledge-base retrieval; cross-intent overlays
(name, profile, notes, rewrite) come last. When the system misbehaves, a rule
here is what you fix, never a prompt. Every field moved away from its default
carries a reason code so a response can be traced to the branch that made it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from bara.decide.behavior import BehaviorDecision
from bara.settings import Settings
from bara.types import ROUTES, FloorName, Route, Tier, evolve  # noqa: F401 - ROUTES is re-exported (tests import it from here)
from bara.understand.features import ContextFeatures
from bara.understand.intent import IntentResult

_SOCIAL_MODES = frozenset({"greeting", "testing_aware"})
NAME_KEYS = ("name", "preferred_name", "display_name")


@dataclass(frozen=True)
class PolicyDecision:
    """What the pipeline should fetch and inject; defaults mean "LLM only, nothing extra"."""

    route: Route = "llm_only"
    inject_kb: bool = False
    kb_k: int = 0
    kb_floor: float = 0.0
    inject_profile: bool = False
    inject_notes: bool = False
    notes_k: int = 0
    inject_qa: bool = False
    qa_k: int = 0
    qa_floor: float = 0.0
    use_history: bool = True
    history_messages: int | None = None  # keep only the last N history messages (None: the whole window)
    privacy_mode: bool = False
    greeting_name: str | None = None
    needs_rewrite: bool = False
    reasons: tuple[str, ...] = ()
    inject_episodic: bool = False  # what was said in earlier conversations
    episodic_k: int = 0

    @property
    def retrieves(self) -> bool:
        """True when any store lookup will run this turn."""
        return self.inject_kb or self.inject_qa or self.inject_notes or self.inject_episodic

    def injects(self, tier: Tier) -> bool:
        """Whether the policy opened ``tier`` this turn."""
        return {"kb": self.inject_kb, "profile": self.inject_profile, "notes": self.inject_notes,
                "qa": self.inject_qa, "episodic": self.inject_episodic}[tier]


def _with(d: PolicyDecision, reason: str, **changes) -> PolicyDecision:
    # ``dataclasses.replace`` without its per-call field walk and frozen __init__ (the gate
    # takes this step ~8 times a turn; see ``bara.types.evolve``).
    return evolve(d, **changes, reasons=d.reasons + (reason,))


def _kb(d: PolicyDecision, route: Route, floor: float, floor_name: FloorName, settings: Settings,
        qa: bool) -> PolicyDecision:
    d = _with(d, f"route:{route}", route=route)
    d = _with(d, f"kb:floor_{floor_name}", inject_kb=True, kb_k=settings.k, kb_floor=floor)
    if qa:
        d = _with(d, "qa:inject", inject_qa=True, qa_k=settings.k, qa_floor=settings.floor_qa)
    return d


def _privacy(d: PolicyDecision, f: ContextFeatures) -> PolicyDecision:
    d = _with(d, "route:privacy", route="privacy", privacy_mode=True)
    d = _with(d, "history:off_privacy", use_history=False)
    return _with(d, "profile:inject_privacy", inject_profile=True) if f.has_profile else d


def _profile(d: PolicyDecision, f: ContextFeatures) -> PolicyDecision:
    if f.is_profile_statement or f.stated_name is not None:
        d = _with(d, "route:profile_update", route="profile_update")
        return _with(d, "history:off_profile_update", use_history=False)
    d = _with(d, "route:profile", route="profile")
    return _with(d, "profile:inject_profile_question", inject_profile=True) if f.has_profile else d


def base_policy(intent: IntentResult, features: ContextFeatures, settings: Settings) -> PolicyDecision:
    """The route and floors implied by the intent alone."""
    d = PolicyDecision()
    name = intent.intent
    if name == "privacy":
        return _privacy(d, features)
    if name == "profile":
        return _profile(d, features)
    if name == "knowledge_base":
        return _kb(d, "rag", settings.floor_kb, "kb", settings, qa=True)
    if name == "continuation":
        return _kb(d, "conversation", settings.floor_continuation, "continuation", settings, qa=True)
    if name == "chitchat":
        return _with(d, "route:llm_only_chitchat")
    return _kb(d, "adaptive", settings.floor_general, "general", settings, qa=False)


def _social_history(d: PolicyDecision, behavior: BehaviorDecision, settings: Settings) -> PolicyDecision:
    """Small talk (thanks, greetings, acknowledgements, tests, questions about the assistant or the
    conversation) needs the last exchange, not the whole window."""
    small_talk = behavior.mode in _SOCIAL_MODES or behavior.skip_retrieval or d.route == "llm_only"
    if not small_talk or not d.use_history or d.history_messages is not None:
        return d
    return _with(d, "history:social_last_exchange", history_messages=settings.gate_social_history_messages)


def apply_behavior(d: PolicyDecision, behavior: BehaviorDecision) -> PolicyDecision:
    """Skip drops every lookup; reduce/boost replace kb k and shift the kb floor."""
    if behavior.skip_retrieval:
        if not d.retrieves:
            return d
        d = _with(d, f"retrieval:skipped_by_{behavior.mode}", route=f"behavior:{behavior.mode}",
                  inject_kb=False, kb_k=0, kb_floor=0.0, inject_qa=False, qa_k=0, qa_floor=0.0)
        return d
    if not d.inject_kb or not (behavior.reduce_retrieval or behavior.boost_retrieval):
        return d
    verb = "reduce" if behavior.reduce_retrieval else "boost"
    floor = round(min(1.0, max(-1.0, d.kb_floor + behavior.floor_delta)), 4)
    return _with(d, f"kb:{verb}_by_{behavior.mode}", kb_k=behavior.k, kb_floor=floor)


def profile_name(profile: Mapping[str, str], features: ContextFeatures) -> str | None:
    """The name just stated wins over the stored one; None when neither exists."""
    if features.stated_name:
        return features.stated_name
    for key in NAME_KEYS:
        value = profile.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def apply_overlays(d: PolicyDecision, features: ContextFeatures, settings: Settings,
                   profile: Mapping[str, str]) -> PolicyDecision:
    """Cross-intent additions that do not depend on the route."""
    name = profile_name(profile, features)
    if name is not None:
        d = _with(d, "overlay:greeting_name", greeting_name=name)
    if features.has_personal_reference and profile and not d.inject_profile and not d.privacy_mode:
        d = _with(d, "overlay:personal_reference_profile", inject_profile=True)
    if features.notes_request and not d.privacy_mode:
        d = _with(d, "overlay:notes_request", inject_notes=True, notes_k=settings.gate_notes_k)
        if d.inject_kb or d.inject_qa:  # "what did we decide about TLS?" is answered by our notes
            d = _with(d, "kb:off_recap_from_notes", route="notes", inject_kb=False, kb_k=0, kb_floor=0.0,
                      inject_qa=False, qa_k=0, qa_floor=0.0)
    return d


def _rewrite(d: PolicyDecision, intent: IntentResult, features: ContextFeatures,
             settings: Settings) -> PolicyDecision:
    """A message needs a standalone rewrite only when something will be searched with it: always
    for a structural follow-up; for any other message in a conversation when the setting says so
    (most in-conversation questions lean on earlier turns without a pronoun to show it)."""
    if not (d.inject_kb or d.inject_qa):  # notes are searched with the user's own words
        return d
    if features.is_followup or intent.intent == "continuation":
        return _with(d, "rewrite:followup", needs_rewrite=True)
    if settings.gate_rewrite_in_conversation and features.history_length > 0:
        return _with(d, "rewrite:in_conversation", needs_rewrite=True)
    return d


def _economy(d: PolicyDecision, features: ContextFeatures, repeated: bool, settings: Settings) -> PolicyDecision:
    """Spend only where it can pay. Old answers beat the documents only for a question asked again,
    so the Q&A tier opens on a repeat; a knowledge turn whose query already carries the topic needs
    the last exchanges, not the whole window (the conversation route keeps it: it *is* the context).
    A statement that records a note ("let's go with TLS 1.2", "I think the cert expired") is
    remembered, not looked up."""
    if d.inject_kb and features.records_note and not features.is_question and settings.gate_note_statements_skip:
        d = _with(d, "kb:off_note_statement", route="llm_only", inject_kb=False, kb_k=0, kb_floor=0.0,
                  inject_qa=False, qa_k=0, qa_floor=0.0)
        return _with(d, "history:note_last_exchange", history_messages=settings.gate_social_history_messages) \
            if d.use_history and d.history_messages is None else d
    if d.inject_qa and settings.gate_qa_only_on_repeat and not repeated:
        d = _with(d, "qa:closed_not_a_repeat", inject_qa=False, qa_k=0, qa_floor=0.0)
    if d.inject_kb and d.route in ("rag", "adaptive") and d.use_history and d.history_messages is None:
        d = _with(d, "history:knowledge_last_exchanges", history_messages=settings.gate_rag_history_messages)
    return d


def resolve_policy(intent: IntentResult, features: ContextFeatures, behavior: BehaviorDecision,
                   settings: Settings, profile: Mapping[str, str], repeated: bool = False) -> PolicyDecision:
    """Intent -> base route, then behaviour, then economy, then overlays, then the rewrite flag.
    ``repeated``: the conversation state saw this question asked before."""
    d = base_policy(intent, features, settings)
    d = _economy(_social_history(apply_behavior(d, behavior), behavior, settings), features, repeated, settings)
    d = apply_overlays(d, features, settings, profile)
    return _rewrite(d, intent, features, settings)


# --- episodic memory ----------------------------------------------------
_RECALL_CUE = re.compile(
    r"\b(do you remember|did (?:i|we) (?:tell|mention|say|talk)|have (?:i|we) (?:told|mentioned)|"
    r"remind me (?:what|when|where|who|how)|last time (?:i|we)|"
    r"(?:when|what|where|who|how) (?:did|do|was|were|have|had) (?:i|we|you)\b)", re.I)
_CAPITALISED = re.compile(r"\b([A-Z][a-z][\w\-]*)(?:'s)?\b")


def episodic_signals(message: str, people: frozenset[str] | set[str]) -> tuple[str, ...]:
    """Reason codes of the personal-memory signals in ``message``: a name the user's episodes know
    (a speaker, or a name they mention; a short form such as "Mel" for Melanie counts) is in it
    ("When did Caroline ..."), or a recall cue about the user ("what did I say about ...")."""
    known = {p.lower() for p in people}
    out = []
    if any(_names(m, known) for m in _CAPITALISED.finditer(message or "")):
        out.append("episodic:names_known_person")
    if _RECALL_CUE.search(message or ""):
        out.append("episodic:recall_cue")
    return tuple(out)


def capitalised_words(message: str) -> list[str]:
    """The words :func:`episodic_signals` tests against the known names: each starts with an ASCII
    capital and an ASCII lower-case letter, so a name can match one only if it starts with those two
    letters, case-insensitively (what the name index keys on, :mod:`bara.memory.episodic_names`)."""
    return [m.group(1) for m in _CAPITALISED.finditer(message or "")]


def _names(m: re.Match, known: set[str]) -> bool:
    """An exact known name anywhere; a short form ("Mel" for Melanie, 3+ letters) only inside the
    sentence, where a capital marks a name rather than the first word ("How" is not Howard)."""
    word = m.group(1).lower()
    if word in known:
        return True
    inside = m.start() > 0 and not m.string[:m.start()].rstrip().endswith((".", "!", "?"))
    return inside and len(word) >= 3 and any(k.startswith(word) for k in known)


def apply_episodic(d: PolicyDecision, message: str, people: frozenset[str] | set[str],
                   settings: Settings) -> PolicyDecision:
    """Open the episodic tier for personal and "when did / what did / do you remember" questions
    (``gate_episodic_min_signals`` of :func:`episodic_signals`); never on the privacy or
    profile-update routes, which store or delete rather than recall."""
    if d.privacy_mode or d.route == "profile_update":
        return d
    signals = episodic_signals(message, people)
    if len(signals) < settings.gate_episodic_min_signals:
        return d
    for code in signals[:-1]:
        d = _with(d, code)
    return _with(d, signals[-1], inject_episodic=True, episodic_k=settings.memory_episodic_k)
