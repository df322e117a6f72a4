"""Q&A tier: similarity floor, recency decay, same-conversation bonus, scoping."""

from __future__ import annotations

import pytest

from bara.memory.qa import QAMemory, recency_bonus
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore

NOW = 1_700_000_000.0
DAY = 86400.0
Q = "How do I configure the HSTS max-age?"


@pytest.fixture
def qa(tmp_path, embedder):
    store = SQLiteStore(tmp_path / "qa.db")
    yield QAMemory(store, embedder, Settings(db=store.location))
    store.close()


def test_recency_bonus_halves_each_half_life():
    assert recency_bonus(0.0, 0.05, DAY) == pytest.approx(0.05)
    assert recency_bonus(DAY, 0.05, DAY) == pytest.approx(0.025)
    assert recency_bonus(3 * DAY, 0.05, DAY) == pytest.approx(0.00625)
    assert recency_bonus(-5.0, 0.05, DAY) == pytest.approx(0.05)  # clock skew never exceeds the weight


def test_add_and_find_a_near_repeat(qa):
    assert qa.add("alice", "c1", Q, "max-age=31536000", now=NOW) == "qa:c1:1"
    (hit,) = qa.search("alice", "how to configure the HSTS max-age", "c1", now=NOW)
    assert (hit.question, hit.answer, hit.user_id, hit.conversation_id) == (Q, "max-age=31536000", "alice", "c1")
    assert hit.similarity >= 0.65


def test_floor_applies_to_similarity_not_to_the_blended_score(qa):
    qa.add("alice", "c1", Q, "a", now=NOW)
    assert qa.search("alice", "What is the capital of France?", "c1", now=NOW) == ()
    (near,) = qa.search("alice", "How is the HSTS max-age set?", "c1", floor=-1.0, now=NOW)
    just_above = near.similarity + 0.01
    assert near.score > just_above  # the bonuses would lift it over the floor...
    assert qa.search("alice", "How is the HSTS max-age set?", "c1", floor=just_above, now=NOW) == ()  # ...but never do


def test_score_formula(qa):
    s = qa.settings
    qa.add("alice", "c1", Q, "a", now=NOW - 2 * s.memory_qa_recency_half_life_s)
    (hit,) = qa.search("alice", Q, "c1", now=NOW)
    assert hit.recency_bonus == pytest.approx(s.memory_qa_recency_weight / 4)
    assert hit.conversation_bonus == s.memory_qa_same_conversation_bonus
    assert hit.score == pytest.approx(hit.similarity + hit.recency_bonus + hit.conversation_bonus)


def test_recent_answer_ranks_first_across_conversations(qa):
    qa.add("alice", "old", Q, "old answer", now=NOW - 30 * DAY)
    qa.add("alice", "new", Q, "new answer", now=NOW - 3600)
    hits = qa.search("alice", Q, "elsewhere", now=NOW)
    assert [h.answer for h in hits] == ["new answer", "old answer"]


def test_same_conversation_ranks_first_at_equal_age(qa):
    qa.add("alice", "c1", Q, "from c1", now=NOW - DAY)
    qa.add("alice", "c2", Q, "from c2", now=NOW - DAY)
    assert [h.answer for h in qa.search("alice", Q, "c2", now=NOW)] == ["from c2", "from c1"]
    assert [h.answer for h in qa.search("alice", Q, "c1", now=NOW)] == ["from c1", "from c2"]


def test_much_closer_question_beats_newer_looser_one(qa):
    qa.add("alice", "c1", Q, "exact", now=NOW - 60 * DAY)
    qa.add("alice", "c1", "How do I set up HSTS?", "loose", now=NOW)
    hits = qa.search("alice", "How do I configure the HSTS max-age?", "c2", now=NOW)
    assert hits[0].answer == "exact"


def test_scoped_to_the_user_and_forget(qa):
    qa.add("alice", "c1", Q, "alice's answer", now=NOW)
    qa.add("bob", "c1", Q, "bob's answer", now=NOW)
    assert [h.answer for h in qa.search("alice", Q, "c1", now=NOW)] == ["alice's answer"]
    assert [h.user_id for h in qa.list("bob")] == ["bob"]
    assert qa.search("carol", Q, "c1", now=NOW) == ()
    assert qa.forget("alice") == 1
    assert qa.list("alice") == [] and len(qa.list("bob")) == 1


def test_precomputed_vector_is_used(qa, embedder):
    vec = embedder.embed([Q])[0]
    qa.add("alice", "c1", Q, "a", question_vector=vec, now=NOW)
    (hit,) = qa.search("alice", "unrelated words entirely", "c1", vector=vec, now=NOW)
    assert hit.similarity == pytest.approx(1.0, abs=1e-5)
