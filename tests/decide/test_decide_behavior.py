"""The behaviour engine, mode by mode, with exact retrieval numbers, lengths, tones and reasons.

Written against the mutants `make mutate` found surviving in bara/decide/behavior.py: every check's
trigger and its boundary, the order in which checks win, and the k / floor arithmetic of each effect
(expected values computed from the Settings used, never copied from a run).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from bara.decide.behavior import MODES, decide_behavior, select_mode
from bara.settings import Settings
from bara.understand.features import compute_features
from bara.understand.intent import IntentResult
from bara.understand.state import ConversationState

CFG = Settings(k=6, gate_reduce_k_delta=2, gate_reduce_floor_delta=0.1, gate_boost_k_delta=3,
               gate_boost_floor_delta=0.07, gate_rapid_fire_streak=3, gate_exploratory_switches=2)
KB = IntentResult("knowledge_base", "rule:knowledge_question", 0.9)
DEFAULT = IntentResult("general", "rule:default", 0.3)
PLAIN = compute_features("What is HTTP Strict Transport Security", [], {}, settings=CFG)
STATE = ConversationState()


def chit(kind: str) -> IntentResult:
    return IntentResult("chitchat", f"rule:{kind}", 0.9, kind)


def mode_of(intent=KB, features=PLAIN, state=STATE, settings=CFG) -> tuple[str, str]:
    return select_mode(intent, features, state, settings)


@pytest.mark.parametrize("kind", ["greeting", "thanks", "goodbye", "acknowledgement"])
def test_social_chitchat_skips_and_a_greeting_loop_is_named(kind):
    assert mode_of(chit(kind)) == ("greeting", f"{kind}_skip")
    assert mode_of(chit(kind), state=replace(STATE, greeting_streak=1)) == ("greeting", f"{kind}_skip")
    assert mode_of(chit(kind), state=replace(STATE, greeting_streak=2)) == ("greeting", "greeting_loop_skip")


def test_greeting_words_skip_only_when_nothing_else_was_recognised_and_no_question_is_asked():
    greeted = replace(PLAIN, is_greeting=True, has_question_mark=False, normalized="hello there")
    assert mode_of(DEFAULT, greeted) == ("greeting", "greeting_skip")
    assert mode_of(DEFAULT, replace(greeted, normalized="hello there, shuffle my workout playlist for me")) == (
        "standard", "standard")  # five words or more follow the greeting: a request in words no pattern lists
    assert mode_of(IntentResult("general", "prototype", 0.5), greeted) == ("greeting", "greeting_skip")
    assert mode_of(IntentResult("knowledge_base", "prototype", 0.5), greeted) == ("standard", "standard")
    assert mode_of(KB, greeted) == ("standard", "standard")
    assert mode_of(DEFAULT, replace(greeted, has_question_mark=True)) == ("standard", "standard")
    assert mode_of(DEFAULT, replace(greeted, is_greeting=False)) == ("standard", "standard")


@pytest.mark.parametrize("text, skips", [
    ("hello, nice to meet you", True), ("hey you", True), ("good morning, lovely weather today", True),
    ("hi there", True), ("hey, have you approved my vacation time yet", False),
    ("hey siri, please cancel my reservation at the loft for 5", False),
    ("hello, i need to cancel tonight's reservation for dinner", False), ("yo play that song", False),
    ("hi there, tell me the apr on my card", False),
    # no request pattern names these verbs: five or more words after the greeting ask for something
    ("hey, toss a die for me and tell me the number", False), ("hello computer, shuffle my workout playlist now", False),
    ("hey there, anybody know where my passport went", False), ("hi, nice to meet you", True),
    ("hello my old friend", True), ("hey, long time no see", True)])
def test_a_greeting_that_goes_on_to_ask_or_request_is_not_skipped(text, skips):
    """The greeting opens the message; what follows it decides (issue 16 round 12 and round 13: CLINC150
    false skips). An unrecognised greeting is small talk only when at most a few words follow it."""
    expected = ("greeting", "greeting_skip") if skips else ("standard", "standard")
    assert mode_of(DEFAULT, compute_features(text, [], {}, settings=CFG)) == expected


def test_testing_and_low_entropy():
    assert mode_of(chit("testing")) == ("testing_aware", "testing_skip")
    noise = replace(PLAIN, low_entropy=True)
    assert mode_of(DEFAULT, noise) == ("testing_aware", "low_entropy_skip")
    assert mode_of(KB, noise) == ("standard", "standard")  # a recognised question is never noise
    assert mode_of(DEFAULT, PLAIN) == ("standard", "standard")


def test_meta():
    assert mode_of(chit("meta")) == ("meta_aware", "meta_skip")
    assert mode_of(IntentResult("chitchat", "rule:x", 0.9, None)) == ("standard", "standard")


@pytest.mark.parametrize("field,value,below,expected", [
    ("tone", "frustrated", "neutral", ("frustration_recovery", "frustration_boost")),
    ("repetition_count", 1, 0, ("repetition_aware", "repetition_boost")),
    ("rapid_fire_streak", CFG.gate_rapid_fire_streak, CFG.gate_rapid_fire_streak - 1, ("rapid_fire", "rapid_fire_reduce")),
    ("exploratory_switches", CFG.gate_exploratory_switches, CFG.gate_exploratory_switches - 1,
     ("exploratory", "exploratory_boost")),
])
def test_state_driven_modes_fire_at_their_threshold_and_not_below(field, value, below, expected):
    assert mode_of(state=replace(STATE, **{field: value})) == expected
    assert mode_of(state=replace(STATE, **{field: below})) == ("standard", "standard")


def test_first_check_wins_in_the_documented_order():
    everything = replace(STATE, tone="frustrated", repetition_count=2, rapid_fire_streak=9, exploratory_switches=9)
    assert mode_of(state=everything)[0] == "frustration_recovery"
    assert mode_of(state=replace(everything, tone="neutral"))[0] == "repetition_aware"
    assert mode_of(state=replace(everything, tone="neutral", repetition_count=0))[0] == "rapid_fire"
    assert mode_of(chit("greeting"), state=everything)[0] == "greeting"
    assert mode_of(chit("testing"), state=everything)[0] == "testing_aware"
    assert mode_of(chit("meta"), state=everything)[0] == "meta_aware"


def _decision(intent=KB, features=PLAIN, state=STATE, settings=CFG):
    return decide_behavior(intent, features, state, settings)


def test_skip_modes_ask_for_nothing():
    for intent in (chit("greeting"), chit("testing"), chit("meta")):
        d = _decision(intent)
        assert (d.skip_retrieval, d.reduce_retrieval, d.boost_retrieval, d.k, d.floor_delta) == \
            (True, False, False, 0, 0.0)
        assert d.answer_length == "short"
    assert [_decision(i).tone for i in (chit("greeting"), chit("testing"), chit("meta"))] == \
        ["warm", "light", "transparent"]


def test_reduce_and_boost_move_k_and_floor_by_the_settings():
    rapid = _decision(state=replace(STATE, rapid_fire_streak=CFG.gate_rapid_fire_streak))
    assert (rapid.reduce_retrieval, rapid.skip_retrieval, rapid.boost_retrieval) == (True, False, False)
    assert rapid.k == CFG.k - CFG.gate_reduce_k_delta and rapid.floor_delta == CFG.gate_reduce_floor_delta
    assert (rapid.answer_length, rapid.tone) == ("short", "concise")
    tiny = CFG.override(k=2, gate_reduce_k_delta=5)
    assert _decision(state=replace(STATE, rapid_fire_streak=3), settings=tiny).k == 1  # never below one chunk
    boosted = _decision(state=replace(STATE, exploratory_switches=CFG.gate_exploratory_switches))
    assert (boosted.boost_retrieval, boosted.skip_retrieval, boosted.reduce_retrieval) == (True, False, False)
    assert boosted.k == CFG.k + CFG.gate_boost_k_delta and boosted.floor_delta == -CFG.gate_boost_floor_delta
    assert (boosted.answer_length, boosted.tone) == ("long", "engaged")
    frustrated = _decision(state=replace(STATE, tone="frustrated"))
    assert (frustrated.k, frustrated.tone, frustrated.answer_length) == \
        (CFG.k + CFG.gate_boost_k_delta, "empathetic", "normal")
    assert _decision(state=replace(STATE, repetition_count=1)).tone == "clarifying"


def test_standard_turn_and_its_reasons():
    d = _decision()
    assert (d.mode, d.k, d.floor_delta, d.answer_length, d.tone) == ("standard", CFG.k, 0.0, "normal", "neutral")
    assert (d.skip_retrieval, d.reduce_retrieval, d.boost_retrieval) == (False, False, False)
    assert d.reasons == ("behavior:standard",)
    assert _decision(chit("greeting")).reasons == ("behavior:greeting_skip",)


def test_elaboration_lengthens_only_normal_length_modes():
    elaborate = replace(PLAIN, followup_signals=("elaboration",))
    d = _decision(features=elaborate)
    assert d.answer_length == "long" and d.reasons == ("behavior:standard", "behavior:elaboration_long")
    short = _decision(features=elaborate, state=replace(STATE, rapid_fire_streak=3))
    assert short.answer_length == "short" and "behavior:elaboration_long" not in short.reasons
    assert _decision(features=replace(PLAIN, followup_signals=("pronoun",))).answer_length == "normal"


def test_every_mode_is_reachable():
    reached = {mode_of(chit("greeting"))[0], mode_of(chit("testing"))[0], mode_of(chit("meta"))[0], mode_of()[0]}
    for state in (replace(STATE, tone="frustrated"), replace(STATE, repetition_count=1),
                  replace(STATE, rapid_fire_streak=3), replace(STATE, exploratory_switches=2)):
        reached.add(mode_of(state=state)[0])
    assert reached == set(MODES)
