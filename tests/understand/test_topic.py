"""Topic-aware rewriting, the per-message vector cache, recaps from notes and small talk, end to end
over the real RFC knowledge base with the real embedder."""

from __future__ import annotations

import numpy as np
import pytest

from kb_helpers import rfc_bara
from bara.memory.vectors import TOPIC, VEC, decode_vector, encode_vector, history_topic, message_meta
from bara.turn.gated import Assistant
from bara.settings import Settings
from bara.understand.features import compute_features
from bara.understand.topic import compose_topic, topic_dependence


@pytest.fixture(scope="module")
def bara(rfc_kb, embedder):
    with rfc_bara(rfc_kb, embedder, "topic") as b:
        yield b


@pytest.fixture
def assistant(bara):
    return Assistant(bara)


def converse(assistant, user, *messages):
    cid, out = None, []
    for m in messages:
        r = assistant.turn(user, m, conversation_id=cid)
        cid = r.conversation_id
        out.append(r)
    return out


def words(text: str) -> set[str]:
    return {w.strip("?.,!'").lower() for w in text.split()}


# --- topic switches and standalone questions: nothing carried ------------------------

@pytest.mark.parametrize("before, after", [
    ("How does TCP congestion control work?", "What is an OAuth 2.0 refresh token used for?"),
    ("What does HSTS protect against?", "How does TLS 1.2 negotiate the cipher suite?"),
    ("How does DNS caching work?", "What is the purpose of the IPv6 flow label?"),
    ("What is QUIC's connection migration?", "How are JSON Web Tokens signed?"),
    ("Which port does SMTP submission use?", "How does DNSSEC validate a signature chain?"),
])
def test_a_new_named_question_is_searched_on_its_own(assistant, user, before, after):
    first, second = converse(assistant, user, before, after)
    t = second.trace
    assert t.retrieved and t.retrieval_query == after and not t.rewritten
    assert "topic:standalone" in t.reasons and "rewrite:standalone" in t.reasons
    leaked = words(before) - words(after) - {"what", "how", "does", "is", "the", "a", "of", "which", "use"}
    assert not leaked & words(t.retrieval_query)


# --- dependent questions: context carried --------------------------------------------

@pytest.mark.parametrize("before, after, carried", [
    ("How does TCP slow start work?", "Why does it double the window every round trip?", "TCP"),
    ("What does HSTS protect against?", "What about its max-age directive?", "HSTS"),
    ("What is DNSSEC?", "how are the keys rolled over?", "DNSSEC"),
    ("How does HTTP/2 multiplex streams?", "and what limits the number of them?", "HTTP"),  # words, not the quoted turn
])
def test_a_dependent_question_carries_the_topic(assistant, user, before, after, carried):
    t = converse(assistant, user, before, after)[1].trace
    assert t.retrieved and t.rewritten and carried in t.retrieval_query
    assert any(r in t.reasons for r in ("topic:followup_cue", "topic:no_own_subject", "topic:similar"))


@pytest.mark.parametrize("small_talk", ["thanks!", "ok, got it", "great, thank you so much"])
def test_a_followup_after_inserted_small_talk_still_carries_the_topic(assistant, user, small_talk):
    first, chat, follow = converse(assistant, user, "What does HSTS protect against?", small_talk,
                                   "What about its max-age directive?")
    assert not chat.trace.retrieved
    assert "HSTS" in follow.trace.retrieval_query and small_talk not in follow.trace.retrieval_query
    assert "topic:history_encoded" not in " ".join(follow.trace.reasons)  # read from the cache


def test_a_greeting_attached_to_a_question_still_retrieves(assistant, user):
    t = converse(assistant, user, "Hi! How does DNSSEC validate a signature chain?")[0].trace
    assert t.retrieved and t.hits


def test_social_turns_see_only_the_last_exchange(assistant, user, bara):
    results = converse(assistant, user, "What does HSTS protect against?", "What about its max-age directive?",
                       "thanks a lot")
    t = results[-1].trace
    assert not t.retrieved and "history:social_last_exchange" in t.reasons
    assert t.context_tokens < results[-2].trace.context_tokens


# --- the vector cache -------------------------------------------------------------------

def test_searched_turns_store_their_vectors_and_skipped_ones_do_not(assistant, user, bara):
    results = converse(assistant, user, "What does HSTS protect against?", "thanks!")
    cid = results[0].conversation_id
    msgs = [m for m in assistant.conversations.history(user, cid) if m.role == "user"]
    model = bara.embedder.model_id
    vec, topic = decode_vector(msgs[0].meta, VEC, model), decode_vector(msgs[0].meta, TOPIC, model)
    direct = bara.embedder.embed(["What does HSTS protect against?"])[0]
    assert vec is not None and topic is not None and float(vec @ direct) > 0.999
    assert msgs[1].meta.get("searched") is False and decode_vector(msgs[1].meta, VEC, model) is None
    assert decode_vector(msgs[0].meta, VEC, "another-embedder") is None


def test_history_without_cached_vectors_is_encoded_once(embedder):
    from bara.memory.conversations import StoredMessage
    msgs = [StoredMessage("c", "u", 1, "user", "What does HSTS protect against?", 0.0, {}),
            StoredMessage("c", "u", 2, "assistant", "It stops downgrade attacks.", 0.0, {}),
            StoredMessage("c", "u", 3, "user", "thanks!", 0.0, {"searched": False})]
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return embedder.embed(texts)

    cold = history_topic(msgs, embedder.model_id, embed, 0.8)
    assert cold.has_context and cold.encoded == 1 and calls == [["What does HSTS protect against?"]]
    cached = [StoredMessage("c", "u", 1, "user", msgs[0].text, 0.0,
                            message_meta(embedder.model_id, True, cold.topic, cold.topic))] + msgs[1:]
    warm = history_topic(cached, embedder.model_id, embed, 0.8)
    assert warm.encoded == 0 and len(calls) == 1 and float(warm.topic @ cold.topic) > 0.999


def test_vector_encoding_round_trips_within_float16_precision():
    rng = np.random.default_rng(3)
    v = rng.standard_normal(384).astype(np.float32)
    v /= np.linalg.norm(v)
    back = decode_vector({"embedder": "m", "vec": encode_vector(v)}, "vec", "m")
    assert back is not None and float(back @ v) > 0.9999
    assert decode_vector({"embedder": "m", "vec": "not base64!"}, "vec", "m") is None


# --- the pure decision --------------------------------------------------------------------

def _unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_dependence_rules_in_order():
    s = Settings()
    hist = compute_features("What does HSTS protect against?", [], {})
    named = "How does TLS 1.2 negotiate the cipher suite?"
    from bara.types import Utterance
    h = [Utterance("user", "What does HSTS protect against?"), Utterance("assistant", "...")]
    f = compute_features(named, h, {})
    far, near = _unit(1, 0, 0), _unit(0, 1, 0)
    assert topic_dependence(named, hist, far, near, False, s).reason == "topic:no_history"
    assert topic_dependence(named, f, far, near, True, s).reason == "topic:standalone"
    assert topic_dependence(named, f, near, near, True, s).reason == "topic:similar"
    assert topic_dependence(named, f, None, near, True, s).reason == "topic:no_vector"
    g = compute_features("what limits the window size?", h, {})
    assert topic_dependence("what limits the window size?", g, far, near, True, s).depends  # no own subject
    p = compute_features("Does TLS 1.2 make it safe?", h, {})
    assert topic_dependence("Does TLS 1.2 make it safe?", p, far, near, True, s).reason == "topic:followup_cue"


def test_composed_topic_leans_towards_the_previous_topic_only_when_dependent():
    v, prev = _unit(1, 0, 0), _unit(0, 1, 0)
    assert np.allclose(compose_topic(v, prev, False, 0.8), v)
    both = compose_topic(v, prev, True, 0.8)
    assert abs(float(np.linalg.norm(both)) - 1.0) < 1e-6 and both[1] > 0 and both[0] > both[1]


# --- recaps and Q&A ---------------------------------------------------------------------------

def test_recap_is_answered_from_notes_not_the_knowledge_base(assistant, user):
    results = converse(assistant, user,
                       "I think the handshake failures come from an expired intermediate certificate.",
                       "Let's go with TLS 1.2 and HSTS for the internal API.",
                       "We still need to figure out how to rotate the OCSP responder keys.",
                       "What did we decide about TLS?", "What are our open questions?",
                       "Remind me of our hypotheses so far.")
    decide, opened, hypo = (r.trace for r in results[3:])
    for t in (decide, opened, hypo):
        assert t.route == "notes" and not t.hits and "kb:off_recap_from_notes" in t.reasons
    tiers = [[h.tier for h in t.memory_hits] for t in (decide, opened, hypo)]
    assert all(k and set(k) == {"notes"} for k in tiers)
    # the asked kind comes first (a note's kind is its trace section)
    firsts = [t.memory_hits[0].section for t in (decide, opened, hypo)]
    assert firsts == ["decision", "open_question", "hypothesis"]
    assert "TLS 1.2" in results[3].answer and "OCSP" in results[4].answer


def test_statements_and_recaps_are_not_remembered_as_qa(assistant, user):
    results = converse(assistant, user, "What does the includeSubDomains directive do?",
                       "Let's go with a one-year max-age for the internal API.",
                       "What did we decide about max-age?")
    assert results[0].trace.stored.qa is True
    assert results[1].trace.stored.qa is False and results[2].trace.stored.qa is False


# --- small talk shaped like a question ------------------------------------------------------

@pytest.mark.parametrize("message", ["does life have any real meaning", "can you answer me in german from now on",
                                     "what do you do for fun", "are you a real person or a program"])
def test_small_talk_shaped_like_a_question_does_not_search(assistant, user, message):
    t = converse(assistant, user, message)[0].trace
    assert not t.retrieved and t.intent == "chitchat"


@pytest.mark.parametrize("message", ["What is TCP slow start?", "how does DNS resolve a name",
                                     "what does the HSTS max-age directive mean"])
def test_real_questions_still_search(assistant, user, message):
    t = converse(assistant, user, message)[0].trace
    assert t.retrieved and t.intent != "chitchat"


@pytest.mark.parametrize("statement", ["Let's go with TLS 1.2 and HSTS for the internal API.",
                                       "We agreed to pin the server certificate for the internal API.",
                                       "We still need to figure out how to rotate the signing keys."])
def test_a_note_statement_is_stored_not_searched(assistant, user, statement):
    t = converse(assistant, user, "What does HSTS protect against?", statement)[1].trace
    assert not t.retrieved and "kb:off_note_statement" in t.reasons and t.stored.notes


def test_a_hypothesis_statement_still_searches(assistant, user):
    t = converse(assistant, user, "I think the TCP retransmission timer is too short.")[0].trace
    assert t.retrieved and "kb:off_note_statement" not in t.reasons


def test_a_question_with_a_note_cue_still_searches(assistant, user):
    t = converse(assistant, user, "I think TLS 1.2 is enough, but how does it negotiate the cipher suite?")[0].trace
    assert t.retrieved and t.hits
