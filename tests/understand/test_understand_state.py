"""Conversation state, turn by turn, with boundaries pinned (written against surviving mutants):
streaks reset, switches decay, windows slide, zero is a valid count, and the similarity thresholds
hold at equality."""

from __future__ import annotations

from dataclasses import replace

from bara.settings import Settings
from bara.understand.features import compute_features
from bara.understand.intent import IntentResult
from bara.understand.state import ConversationState, jaccard, update_state

HISTORY_WINDOW = Settings().state_history_window

CFG = Settings(gate_short_query_words=4, gate_repetition_similarity=0.8, gate_topic_switch_similarity=0.35)
KB = IntentResult("knowledge_base", "rule:knowledge_question", 0.9)
GENERAL = IntentResult("general", "rule:default", 0.3)


def chit(kind: str) -> IntentResult:
    return IntentResult("chitchat", f"rule:{kind}", 0.9, kind)


def step(state, message, intent=KB, settings=CFG, **feature_changes):
    features = replace(compute_features(message, [], {}, settings=settings), **feature_changes)
    return update_state(state, message, intent, features, settings)


def test_jaccard_of_content_words():
    assert jaccard("tls handshake keys", "tls handshake keys") == 1.0
    assert jaccard("tls handshake", "dns resolver") == 0.0
    assert jaccard("tls handshake", "tls resolver") == 1 / 3
    assert jaccard("the a of", "tls handshake") == 0.0 and jaccard("tls handshake", "the a of") == 0.0
    assert jaccard("", "") == 0.0


def test_short_queries_build_a_rapid_fire_streak_at_the_word_limit_and_reset():
    s = step(None, "hsts max age now")  # exactly gate_short_query_words words
    assert s.rapid_fire_streak == 1
    s = step(s, "tls version please ok")
    assert s.rapid_fire_streak == 2
    s = step(s, "How does a browser decide which certificate authority to trust for a site?")
    assert s.rapid_fire_streak == 0
    assert step(None, "hello", chit("greeting")).rapid_fire_streak == 0  # chit-chat is not a query


def test_topic_switches_accumulate_decay_by_one_and_ignore_chitchat():
    s = step(None, "How does TCP retransmission work?")
    s = step(s, "What is a DNS resource record?")
    assert s.exploratory_switches == 1
    s = step(s, "Explain HSTS preload lists for browsers")
    assert s.exploratory_switches == 2
    assert step(s, "thanks", chit("thanks")).exploratory_switches == 2  # chit-chat leaves it alone
    on_topic = step(s, "What about HSTS preload lists for subdomains?")
    assert on_topic.exploratory_switches == 1  # decays by exactly one
    assert step(replace(s, exploratory_switches=0), "HSTS preload lists again").exploratory_switches == 0


def test_topic_switch_by_vector_is_strictly_below_the_threshold():
    s = step(None, "How does TCP retransmission work?")
    assert step(s, "What is a DNS record?", topic_similarity=0.35).exploratory_switches == 0  # equal: same topic
    assert step(s, "What is a DNS record?", topic_similarity=0.3499).exploratory_switches == 1
    assert step(s, "What is a DNS record?", GENERAL, topic_similarity=0.1).exploratory_switches == 1
    assert step(s, "What is a DNS record?", IntentResult("profile", "rule:p", 0.9),
                topic_similarity=0.1).exploratory_switches == 0  # only questions switch topics
    assert step(s, "What is a DNS record?", is_followup=True, topic_similarity=0.1).exploratory_switches == 0


def test_topic_switch_by_words_looks_at_the_last_three_queries_only():
    s = None
    for message in ("TCP retransmission timers", "DNS resolver caches", "HSTS preload lists", "OCSP stapling"):
        s = step(s, message)
    # shares a word with the first query only, which is outside the last three: a switch
    assert step(replace(s, exploratory_switches=0), "TCP congestion").exploratory_switches == 1
    assert step(replace(s, exploratory_switches=0), "OCSP responders").exploratory_switches == 0


def test_repetition_frustration_and_streaks():
    s = step(None, "How does HSTS work?")
    s = step(s, "How does HSTS work?")
    assert (s.repetition_count, s.tone, s.frustration_streak) == (1, "neutral", 0)
    s = step(s, "How does HSTS work?")
    assert (s.repetition_count, s.tone, s.frustration_streak) == (2, "frustrated", 1)
    s = step(s, "What is DNS?")
    assert (s.repetition_count, s.tone, s.frustration_streak) == (0, "neutral", 0)
    angry = step(s, "This is useless, what is DNS?", tone_signal="frustrated")
    assert angry.frustration_streak == 1 and angry.tone == "frustrated"


def test_counters_windows_and_followup_streak():
    s = step(None, "testing", chit("testing"))
    s = step(s, "who made you", chit("meta"))
    s = step(s, "hi", chit("greeting"))
    assert (s.testing_count, s.greeting_streak, s.turn_count) == (2, 1, 3)
    assert s.recent_queries == ()  # chit-chat is never a query
    assert s.intent_history == ("chitchat",) * 3
    s = step(s, "And what about it?", IntentResult("continuation", "rule:c", 0.9))
    assert s.followup_streak == 1 and s.greeting_streak == 0
    s = step(s, "more on that", KB, is_followup=True)
    assert s.followup_streak == 2
    s = step(s, "What is DNS?", KB, is_followup=False)
    assert s.followup_streak == 0
    for i in range(HISTORY_WINDOW + 2):
        s = step(s, f"question number {i} about dns")
    assert len(s.recent_queries) == HISTORY_WINDOW and s.recent_queries[-1] == "question number 9 about dns"
    assert len(s.intent_history) == HISTORY_WINDOW


def test_settings_default_when_none_given():
    features = compute_features("hsts max age now", [], {})
    assert update_state(None, "hsts max age now", KB, features).rapid_fire_streak == 1


def test_round_trip_keeps_zero_counts_and_refuses_bad_values():
    state = ConversationState(turn_count=0, repetition_count=0, recent_queries=("a",), tone="positive")
    assert ConversationState.from_dict(state.to_dict()) == state
    back = ConversationState.from_dict({"turn_count": 0, "repetition_count": 3, "tone": "frustrated",
                                        "rapid_fire_streak": -1, "greeting_streak": True, "testing_count": "2"})
    assert (back.turn_count, back.repetition_count, back.tone) == (0, 3, "frustrated")
    assert (back.rapid_fire_streak, back.greeting_streak, back.testing_count) == (0, 0, 0)
    assert ConversationState.from_dict({"tone": 5}).tone == "neutral"
    assert ConversationState.from_dict({"tone": "furious"}).tone == "neutral"
    assert state.to_dict()["recent_queries"] == ["a"] and "version" in state.to_dict()
