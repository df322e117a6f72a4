"""Tests for bara.decide: behaviour modes, policy routes, overlays and the ``decide`` entry point."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings as hyp_settings, strategies as st

from bara.decide import ROUTES, GateResult, PolicyDecision, decide
from bara.settings import Settings
from bara.types import Utterance
from bara.understand import ConversationState, load_prototypes

CFG = Settings()
ANSWER = "Here is what the documentation says about that."
PROFILE = {"name": "Ana", "expertise": "backend developer"}


def converse(*messages: str, profile=None, settings=CFG) -> GateResult:
    """Replay user turns (with canned answers) and return the gate result of the last one."""
    history: list[Utterance] = []
    state = None
    result = None
    for message in messages:
        result = decide(message, tuple(history), state, profile or {}, settings)
        state = result.new_state
        history += [Utterance("user", message), Utterance("assistant", ANSWER)]
    assert result is not None
    return result


# --- behaviour modes ------------------------------------------------------------

MODE_CASES = {
    "standard": ("How does TCP retransmission work?",),
    "greeting": ("hi there!",),
    "testing_aware": ("testing 123",),
    "meta_aware": ("who made you?",),
    "frustration_recovery": ("How does TCP retransmission work?",
                             "No, that's still wrong. How do duplicate ACKs trigger it?"),
    "repetition_aware": ("How does TCP retransmission work?", "How does TCP retransmission work?"),
    "rapid_fire": ("tcp port?", "udp port?", "dns port?"),
    "exploratory": ("What is TCP slow start?", "How do vaccines train the immune system?",
                    "Explain mutual fund expense ratios"),
}


@pytest.mark.parametrize("mode", sorted(MODE_CASES))
def test_every_behaviour_mode_is_reachable(mode):
    result = converse(*MODE_CASES[mode])
    assert result.behavior.mode == mode
    assert result.behavior.reasons and all(r.startswith("behavior:") for r in result.behavior.reasons)


@pytest.mark.parametrize("mode", ["greeting", "testing_aware", "meta_aware"])
def test_social_modes_skip_retrieval_and_answer_short(mode):
    result = converse(*MODE_CASES[mode])
    assert result.behavior.skip_retrieval and result.behavior.answer_length == "short"
    assert not result.policy.retrieves


def test_greeting_loop_is_named():
    assert "behavior:greeting_loop_skip" in converse("hi", "hello", "hey there").behavior.reasons


_ROUTE_FLOOR = {"rag": CFG.floor_kb, "conversation": CFG.floor_continuation, "adaptive": CFG.floor_general}


def test_reduce_lowers_k_and_raises_floor():
    fast = converse(*MODE_CASES["rapid_fire"]).policy
    base = converse("How does TCP retransmission work?", "dns port?").policy  # standard follow-up
    assert fast.route == base.route == "conversation"
    assert fast.kb_k < base.kb_k == CFG.k and fast.kb_floor > base.kb_floor == _ROUTE_FLOOR["conversation"]
    assert "kb:reduce_by_rapid_fire" in fast.reasons


@pytest.mark.parametrize("mode", ["frustration_recovery", "repetition_aware", "exploratory"])
def test_boost_raises_k_and_lowers_floor(mode):
    result = converse(*MODE_CASES[mode])
    assert result.behavior.boost_retrieval
    assert result.policy.kb_k > CFG.k and result.policy.kb_floor < _ROUTE_FLOOR[result.policy.route]
    assert f"kb:boost_by_{mode}" in result.policy.reasons


def test_exploratory_answers_long():
    assert converse(*MODE_CASES["exploratory"]).behavior.answer_length == "long"


def test_behavior_deltas_follow_settings():
    wide = CFG.override(gate_boost_k_delta=5, gate_boost_floor_delta=0.2)
    policy = converse(*MODE_CASES["repetition_aware"], settings=wide).policy
    assert policy.kb_k == CFG.k + 5 and policy.kb_floor == pytest.approx(CFG.floor_kb - 0.2)


# --- routes ----------------------------------------------------------------------

ROUTE_CASES = [
    (("hi there!",), {}, "llm_only"),
    (("What is the difference between TCP and UDP?",), {}, "rag"),
    (("How does TCP retransmission work?", "what about the other one?"), {}, "conversation"),
    (("I heard the toolchain is not available in South America.",), {}, "adaptive"),
    (("what's my name?",), PROFILE, "profile"),
    (("call me Ana",), {}, "profile_update"),
    (("what do you know about me?",), PROFILE, "privacy"),
    (("hello, nice to meet you",), {}, "behavior:greeting"),
    (("jjjj kkkk",), {}, "behavior:testing_aware"),
]


@pytest.mark.parametrize("messages,profile,route", ROUTE_CASES)
def test_every_route_is_reachable(messages, profile, route):
    policy = converse(*messages, profile=profile).policy
    assert policy.route == route
    assert route in ROUTES or route.startswith("behavior:")


def test_route_floors_come_from_settings():
    floors = {"rag": CFG.floor_kb, "conversation": CFG.floor_continuation, "adaptive": CFG.floor_general}
    for messages, profile, route in ROUTE_CASES:
        policy = converse(*messages, profile=profile).policy
        if route in floors:
            assert policy.inject_kb and policy.kb_k == CFG.k and policy.kb_floor == floors[route]
    first = converse("What is the difference between TCP and UDP?").policy
    assert not first.inject_qa and "qa:closed_not_a_repeat" in first.reasons  # Q&A opens on a repeat
    qa = converse("What is the difference between TCP and UDP?", "what is the difference between TCP and UDP").policy
    assert qa.inject_qa and qa.qa_floor == CFG.floor_qa
    eager = converse("What is the difference between TCP and UDP?", settings=CFG.override(gate_qa_only_on_repeat=False))
    assert eager.policy.inject_qa
    assert converse("What is TCP?", settings=CFG.override(floor_kb=0.5)).policy.kb_floor == 0.5


def test_chitchat_never_retrieves():
    for message in ("hi there!", "thanks!", "ok", "bye", "who are you?"):
        result = converse("How does TCP work?", message)
        assert result.intent.intent == "chitchat" and not result.policy.retrieves
        assert result.policy.route == "llm_only"


@pytest.mark.parametrize("message", ["What are the privacy implications of face recognition?",
                                     "Tell me about the privacy issues in social networks.",
                                     "What are the Facebook privacy control tips from the attorney general?",
                                     "What do they get in return for their privacy?"])
def test_privacy_as_a_topic_is_a_question_for_the_knowledge_base(message):
    policy = converse(message).policy
    assert not policy.privacy_mode and policy.retrieves


@pytest.mark.parametrize("message", ["Is my privacy safe with you?", "what is your privacy policy?",
                                     "how do you protect our privacy?"])
def test_asking_about_ones_own_privacy_takes_the_privacy_route(message):
    policy = converse(message, profile=PROFILE).policy
    assert policy.privacy_mode and not policy.retrieves


def test_privacy_and_profile_update_drop_history():
    privacy = converse("delete my data", profile=PROFILE).policy
    assert privacy.privacy_mode and privacy.inject_profile and not privacy.use_history
    assert not privacy.retrieves
    assert not converse("call me Ana").policy.use_history


# --- overlays ---------------------------------------------------------------------

def test_known_name_sets_greeting_name():
    assert converse("hi there!", profile=PROFILE).policy.greeting_name == "Ana"
    assert converse("call me Bo").policy.greeting_name == "Bo"
    assert converse("hi there!").policy.greeting_name is None


def test_personal_reference_with_profile_injects_profile():
    policy = converse("How should I structure my TCP client code?", profile=PROFILE).policy
    assert policy.inject_profile and "overlay:personal_reference_profile" in policy.reasons
    assert not converse("How should I structure my TCP client code?").policy.inject_profile


def test_notes_request_injects_notes():
    policy = converse("How does TCP work?", "what did we decide about retries?").policy
    assert policy.inject_notes and policy.notes_k == CFG.gate_notes_k


def test_followups_need_a_rewrite():
    assert converse("How does TCP work?", "what about the other one?").policy.needs_rewrite
    assert not converse("What is the difference between TCP and UDP?").policy.needs_rewrite
    assert not converse("How does TCP work?", "thanks!").policy.needs_rewrite


_REASON_PREFIXES = {
    "route": ("route:", "retrieval:"), "inject_kb": ("kb:",), "kb_k": ("kb:",),
    "kb_floor": ("kb:",), "inject_profile": ("profile:", "overlay:personal_reference"),
    "inject_notes": ("overlay:notes",), "notes_k": ("overlay:notes",), "inject_qa": ("qa:",),
    "qa_k": ("qa:",), "qa_floor": ("qa:",), "use_history": ("history:",),
    "privacy_mode": ("route:privacy",), "greeting_name": ("overlay:greeting_name",),
    "needs_rewrite": ("rewrite:",),
}


@pytest.mark.parametrize("messages", [c[0] for c in ROUTE_CASES] + list(MODE_CASES.values()))
def test_every_changed_field_has_a_reason(messages):
    policy = converse(*messages, profile=PROFILE).policy
    default = PolicyDecision()
    for field, prefixes in _REASON_PREFIXES.items():
        if getattr(policy, field) != getattr(default, field):
            assert any(r.startswith(prefixes) for r in policy.reasons), (field, policy.reasons)


# --- decide: purity, prototypes, properties ------------------------------------------

def test_decide_is_pure():
    history = [Utterance("user", "How does TCP work?"), Utterance("assistant", ANSWER)]
    state = converse("How does TCP work?").new_state
    profile = dict(PROFILE)
    vec = np.linspace(-1, 1, 384, dtype=np.float32)
    snapshot = (copy.deepcopy(history), state, dict(profile), vec.copy())
    first = decide("and what about the other one?", history, state, profile, CFG, message_vector=vec)
    second = decide("and what about the other one?", history, state, profile, CFG, message_vector=vec)
    assert first == second
    assert (history, state, profile) == snapshot[:3] and np.array_equal(vec, snapshot[3])
    assert first.new_state.turn_count == state.turn_count + 1


def test_gate_result_is_frozen_and_traced():
    result = converse("What is TCP?")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.policy.kb_k = 10  # type: ignore[misc]
    assert result.reasons[:2] == ("intent:knowledge_base", "intent_source:rule:knowledge_question")
    assert set(result.policy.reasons) <= set(result.reasons)


def test_decide_uses_prototypes_only_when_rules_are_silent():
    index = load_prototypes()
    vec = index.vectors[index.labels.index("chitchat:thanks")].copy()
    silent = decide("I heard the toolchain is not available in South America.", (), None, {}, CFG,
                    prototypes=index, message_vector=vec)
    assert silent.intent.source == "prototype" and silent.behavior.mode == "greeting"
    assert not silent.policy.retrieves
    ruled = decide("What does RFC 793 say about TCP?", (), None, {}, CFG, prototypes=index, message_vector=vec)
    assert ruled.intent.source == "rule:knowledge_question" and ruled.policy.route == "rag"
    # a question recognised by its form alone, sitting on a chit-chat prototype, is small talk
    small = decide("What is the meaning of all this?", (), None, {}, CFG, prototypes=index, message_vector=vec)
    assert small.intent.source == "prototype_override" and not small.policy.retrieves


@hyp_settings(max_examples=200, deadline=None)
@given(st.text(), st.booleans())
def test_any_text_gives_a_valid_decision(message, with_history):
    history = (Utterance("user", "How does TCP work?"), Utterance("assistant", ANSWER)) if with_history else ()
    result = decide(message, history, ConversationState(), PROFILE, CFG)
    assert 0.0 <= result.features.followup_score <= 1.0
    assert result.policy.route in ROUTES or result.policy.route.startswith("behavior:")
    assert result.policy.kb_k >= 0 and -1.0 <= result.policy.kb_floor <= 1.0
