"""Tests for bara.understand: features, intent rules, prototypes and conversation state."""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings as hyp_settings, strategies as st

from bara.errors import ConfigError
from bara.settings import Settings
from bara.types import Utterance
from bara.understand.sanitize import sanitize
from bara.understand import (CHITCHAT_KINDS, ConversationState, IntentResult, PrototypeIndex,
                             classify_intent, compute_features, load_prototypes, update_state)

CFG = Settings()
HISTORY = (
    Utterance("user", "How does TCP retransmission work?"),
    Utterance("assistant", "TCP retransmits a segment when its timer expires or on duplicate ACKs."),
)
TOOLCHAIN = "I heard the toolchain is not available in South America."


def feats(message, history=HISTORY, profile=None, **kw):
    return compute_features(message, history, profile or {}, settings=CFG, **kw)


def classify(message, history=HISTORY, prototypes=None, vector=None):
    return classify_intent(message, feats(message, history), prototypes, vector, settings=CFG)


@pytest.fixture(scope="module")
def index() -> PrototypeIndex:
    return load_prototypes()


# --- follow-up score --------------------------------------------------------

def test_followup_score_is_zero_without_history():
    f = feats("what about the other one?", history=())
    assert f.followup_score == 0.0 and not f.is_followup and f.followup_signals == ()


def test_other_one_is_a_followup():
    f = feats("what about the other one?")
    assert f.is_followup and f.followup_score >= 0.5
    assert {"starter", "reference"} <= set(f.followup_signals)


def test_followup_score_is_capped_at_one():
    f = feats("and what about that function? tell me more about it, elaborate")
    assert len(f.followup_signals) >= 4 and f.followup_score == 1.0


def test_short_question_needs_an_active_conversation():
    assert "short_question" in feats("why?").followup_signals
    assert "short_question" not in feats("why?", history=HISTORY[:1]).followup_signals


def test_standalone_question_is_not_a_followup():
    assert not feats("What port does SMTP use by default?").is_followup


# --- other features -----------------------------------------------------------

@pytest.mark.parametrize("message,name", [
    ("Call me Ana", "Ana"), ("hi, my name is José!", "José"), ("call me later", None),
    ("call me an uber", None), ("what is TCP?", None),
])
def test_stated_name(message, name):
    assert feats(message).stated_name == name


@pytest.mark.parametrize("message,field", [
    ("Hello there", "is_greeting"), ("I prefer short answers", "is_profile_statement"),
    ("what's my name?", "is_profile_question"), ("how do I configure my router", "has_personal_reference"),
    ("what do you know about me?", "privacy_signal"), ("please delete my data", "privacy_signal"),
    ("what did we decide about retries?", "notes_request"), ("hmm", "low_entropy"),
])
def test_boolean_signals(message, field):
    assert getattr(feats(message), field) is True


@pytest.mark.parametrize("message, asks", [
    ("which name have you got stored for me?", True), ("how do you address me", True),
    ("what's my full name in your records", True), ("tell me what you call me", True),
    ("let me know the names you have for me", True), ("is sam my name", True),
    ("How do I change my name?", False), ("how do i get my name changed on a driver's license", False),
    ("what is the legal name of the company", False), ("send a text to lisa and ask her to call me later", False),
    ("my name is brad", False), ("what is the name of the TCP timer", False),
])
def test_asking_what_bara_calls_the_user_is_a_profile_question(message, asks):
    """Round 12: questions about the name bara has for the user ask the profile, not the knowledge base;
    asking how to change a name is a knowledge question."""
    f = feats(message, history=())
    assert f.is_profile_question is asks
    if asks:
        assert classify(message, history=()).intent == "profile"


def test_forgetting_a_fact_is_not_a_privacy_request():
    assert not feats("I always forget how the TCP handshake works").privacy_signal


def test_counts_profile_and_tone():
    f = feats("That's wrong, not what I asked!!", profile={"name": "Ana"})
    assert f.word_count == 6 and not f.has_question_mark and f.has_profile
    assert f.tone_signal == "frustrated"
    assert feats("great, thanks").tone_signal == "positive"


def test_topic_similarity_needs_vectors():
    assert feats("what is dns?").topic_similarity is None
    a, b = np.eye(4, dtype=np.float32)[:2]
    same = feats("what is dns?", message_vector=a, history_vectors=np.stack([a, a]))
    other = feats("what is dns?", message_vector=a, history_vectors=[b])
    assert same.topic_similarity == pytest.approx(1.0) and other.topic_similarity == pytest.approx(0.0)


def test_compute_features_does_not_mutate_inputs():
    history, profile = list(HISTORY), {"name": "Ana"}
    vec, hist_vecs = np.ones(4, dtype=np.float32), np.ones((2, 4), dtype=np.float32)
    before = (copy.deepcopy(history), dict(profile), vec.copy(), hist_vecs.copy())
    first = compute_features("and it?", history, profile, vec, hist_vecs, settings=CFG)
    second = compute_features("and it?", history, profile, vec, hist_vecs, settings=CFG)
    assert first == second
    assert history == before[0] and profile == before[1]
    assert np.array_equal(vec, before[2]) and np.array_equal(hist_vecs, before[3])


# --- intent rules ---------------------------------------------------------------

@pytest.mark.parametrize("message,intent,source,kind", [
    ("", "chitchat", "rule:empty", "testing"),
    ("what do you know about me?", "privacy", "rule:privacy", None),
    ("call me Ana", "profile", "rule:profile_statement", None),
    ("what's my name?", "profile", "rule:profile_question", None),
    ("testing 123", "chitchat", "rule:testing", "testing"),
    ("hi there!", "chitchat", "rule:greeting", "greeting"),
    ("thanks a lot!", "chitchat", "rule:thanks", "thanks"),
    ("ok bye", "chitchat", "rule:goodbye", "goodbye"),
    ("ok, got it", "chitchat", "rule:acknowledgement", "acknowledgement"),
    ("who made you?", "chitchat", "rule:meta", "meta"),
    ("what about the other one?", "continuation", "rule:followup", None),
    ("can you give an example", "continuation", "rule:elaboration", None),
    ("why?", "continuation", "rule:short_question", None),
    ("Can you explain how DNS caching works?", "knowledge_base", "rule:knowledge_question", None),
    ("Summary of RFC 7540 please", "knowledge_base", "rule:technical_reference", None),
    (TOOLCHAIN, "general", "rule:default", None),
])
def test_rules_record_their_source(message, intent, source, kind):
    result = classify(message)
    assert (result.intent, result.source, result.chitchat) == (intent, source, kind)
    assert 0.0 < result.confidence <= 1.0


@pytest.mark.parametrize("message, states", [
    ("I love hiking in the Alps", True), ("call me Ana", True), ("I work as a nurse in Leeds", True),
    ("please remember that I prefer short answers", True),
    ("send a text to my wife saying i love you", False), ("play i like that by janelle monae", False),
    ("email the team that i am from the london office", False), ("order the pizza i like most", False),
    ("tell me which bus i am from here", False), ("book the hotel i like in rome", False)])
def test_a_profile_phrase_inside_a_command_or_question_states_nothing(message, states):
    """Round 13 (CLINC150 train false skips): "text chris and say i love you" quotes a profile phrase as a
    command's object. Such a message is a request, not a profile statement."""
    result = classify(message)
    assert (result.source == "rule:profile_statement") is states


def test_greeting_with_a_question_is_not_chitchat():
    assert classify("hi, what is the difference between TCP and UDP?").intent == "knowledge_base"


def test_intent_result_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        classify("hi").intent = "general"  # type: ignore[misc]


# --- prototypes -------------------------------------------------------------------

def _vector_of(index: PrototypeIndex, label: str) -> np.ndarray:
    return index.vectors[index.labels.index(label)].copy()


def test_shipped_index_is_small_and_covers_every_label(index):
    assert index.dim == 384 and len(index.to_bytes()) < 2_000_000
    kinds = {lab.split(":", 1)[1] for lab in index.label_set if lab.startswith("chitchat:")}
    assert kinds == set(CHITCHAT_KINDS)
    assert {"general", "knowledge_base", "profile", "privacy"} <= index.label_set


@pytest.mark.parametrize("message, profile", [
    ("remind me to call my landlord tomorrow", False), ("i have to phone the dentist", False),
    ("dial grandma on speaker", False), ("connect me with the front desk", False), ("ring my sister", False),
    ("i go by brad", True), ("people usually call me jim", True), ("what should i call you", True)])
def test_a_profile_guess_about_calling_someone_else_is_dropped(index, message, profile):
    """Round 13 (CLINC150 train false skips): the profile prototypes are names users give ("call me Bob"), so
    "remind me to call bob" lands near them. Calling someone else is a request, never a profile turn."""
    result = classify(message, prototypes=index, vector=_vector_of(index, "profile"))
    assert (result.intent == "profile") is profile


@pytest.mark.parametrize("message, chitchat", [
    ("add milk to the shopping list", False), ("order me some printer paper", False),
    ("book a table for four at noon", False), ("pay the electricity bill", False), ("play some jazz", False),
    ("give me a fun fact about otters", True), ("show me something funny", True), ("call me maybe", True)])
def test_a_chit_chat_guess_for_a_request_to_act_is_dropped(index, message, chitchat):
    """Round 13 (CLINC150 train false skips): "add a vet appointment", "purchase me dog food" sat near chit-chat
    prototypes. A message that opens with an action verb asks for something; "give me"/"show me" may not."""
    result = classify(message, prototypes=index, vector=_vector_of(index, "chitchat:greeting"))
    assert (result.intent == "chitchat") is chitchat


def test_prototype_used_only_when_rules_are_inconclusive(index):
    vec = _vector_of(index, "chitchat:greeting")
    by_proto = classify(TOOLCHAIN, prototypes=index, vector=vec)
    assert (by_proto.intent, by_proto.source, by_proto.chitchat) == ("chitchat", "prototype", "greeting")
    assert by_proto.confidence > 0.9
    assert classify("What does RFC 5681 say about slow start?", prototypes=index,
                    vector=vec).source == "rule:knowledge_question"
    assert classify("What is TCP slow start?", prototypes=index, vector=vec).source == "prototype_override"
    assert classify(TOOLCHAIN, prototypes=index, vector=None).source == "rule:default"


def test_weak_or_mismatched_vectors_fall_back_to_default(index):
    far = -_vector_of(index, "chitchat:greeting")
    far_sim = index.nearest(far)[1]
    strict = CFG.override(gate_prototype_min_similarity=min(1.0, far_sim + 0.01))
    f = feats(TOOLCHAIN)
    assert classify_intent(TOOLCHAIN, f, index, far, settings=strict).source == "rule:default"
    assert classify_intent(TOOLCHAIN, f, index, np.ones(7), settings=CFG).source == "rule:default"
    assert classify_intent(TOOLCHAIN, f, index, np.zeros(384), settings=CFG).source == "rule:default"


def test_index_round_trips_and_rejects_bad_files(index, tmp_path):
    again = PrototypeIndex.from_bytes(index.to_bytes())
    assert again.labels == index.labels and np.allclose(again.vectors, index.vectors, atol=1e-3)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ConfigError):
        load_prototypes(bad)
    with pytest.raises(ConfigError):
        load_prototypes(tmp_path / "missing.npz")


def test_from_arrays_copies_the_callers_array():
    raw = np.array([[3.0, 4.0], [0.0, 2.0]])
    idx = PrototypeIndex.from_arrays(raw, ["a", "b"])
    assert raw[0, 0] == 3.0 and idx.nearest(np.array([1.0, 0.0]))[0] == "a"


# --- state ------------------------------------------------------------------------

def step(state, message, history=HISTORY):
    f = feats(message, history)
    return update_state(state, message, classify_intent(message, f, settings=CFG), f, CFG)


def test_update_state_returns_a_new_object():
    s0 = ConversationState()
    s1 = step(s0, "How does TCP retransmission work?")
    assert s0 == ConversationState() and s1 is not s0
    assert s1.turn_count == 1 and s1.intent_history == ("knowledge_base",)


def test_repetition_and_frustration():
    s = ConversationState()
    for _ in range(3):
        s = step(s, "How does TCP retransmission work?")
    assert s.repetition_count == 2 and s.tone == "frustrated"
    assert step(ConversationState(), "this is useless").tone == "frustrated"


def test_rapid_fire_streak_and_testing_count():
    s = ConversationState()
    for q in ("tcp port?", "udp port?", "dns port?"):
        s = step(s, q)
    assert s.rapid_fire_streak == 3
    s = step(s, "testing 123")
    assert s.rapid_fire_streak == 0 and s.testing_count == 1


def test_exploratory_switches_accumulate():
    s = ConversationState()
    for q in ("What is TCP slow start?", "How do vaccines train immunity?", "Explain fund expense ratios"):
        s = step(s, q, history=())
    assert s.exploratory_switches == 2


def test_state_round_trips_through_json():
    s = step(step(ConversationState(), "hi"), "How does TCP retransmission work?")
    data = json.loads(json.dumps(s.to_dict()))
    assert data["version"] == 1 and ConversationState.from_dict(data) == s


def test_from_dict_tolerates_missing_unknown_and_bad_keys():
    assert ConversationState.from_dict({}) == ConversationState()
    assert ConversationState.from_dict(None) == ConversationState()
    s = ConversationState.from_dict({"turn_count": 3, "tone": "furious", "repetition_count": "x",
                                     "recent_queries": ["a", 2], "future_field": 1})
    assert s.turn_count == 3 and s.tone == "neutral" and s.repetition_count == 0
    assert s.recent_queries == ("a", "2")


# --- properties ---------------------------------------------------------------------

@hyp_settings(max_examples=300, deadline=None)
@given(st.text(), st.integers(min_value=0, max_value=4))
def test_any_text_gives_bounded_features(message, turns):
    f = compute_features(message, HISTORY * turns, {}, settings=CFG)
    assert 0.0 <= f.followup_score <= 1.0
    assert f.followup_score == 0.0 or turns > 0
    result = classify_intent(message, f, settings=CFG)
    assert isinstance(result, IntentResult) and result.source.startswith("rule:")


# Input sanitising at its boundaries (written against surviving mutants).


def test_sanitize_reasons_and_cap_boundary():
    assert sanitize(b"plain ascii", 100).reasons == ()  # valid bytes are not "invalid utf-8"
    assert sanitize("caf\u00e9".encode("utf-8"), 100).text == "caf\u00e9"
    bad = sanitize(b"bad \xff byte", 100)
    assert "\ufffd" in bad.text and bad.reasons == ("input:invalid_utf8_replaced",)
    assert sanitize("lone \ud800 surrogate", 100).reasons == ("input:invalid_utf8_replaced",)
    empty = sanitize("  \x00 ", 100)
    assert (empty.text, empty.query) == ("", "") and empty.reasons[-1] == "input:empty"
    exact = sanitize("x" * 10, 10)
    assert exact.query == "x" * 10 and exact.reasons == ()  # exactly at the cap is not truncated
    over = sanitize("x" * 11, 10)
    assert over.query == "x" * 10 and over.text == "x" * 11 and over.reasons == ("input:truncated_for_retrieval",)
