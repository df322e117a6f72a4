"""Notes tier: cue extraction, concepts, and "what did we decide about X" retrieval."""

from __future__ import annotations

import pytest

from bara.memory.notes import Note, NotesMemory, extract_concepts, extract_notes, recap_topic
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore


def kinds(user: str, assistant: str = "") -> list[tuple[str, str]]:
    return [(n.kind, n.text) for n in extract_notes(user, assistant)]


@pytest.mark.parametrize("user, kind", [
    ("We decided to use PostgreSQL for the event store.", "decision"),
    ("ok, let's go with exponential backoff", "decision"),
    ("We agreed on a 30 second timeout.", "decision"),
    ("So the conclusion is that Nagle's algorithm causes the delay.", "conclusion"),
    ("I think the retransmission timer is too aggressive.", "hypothesis"),
    ("Hypothesis: the MTU is wrong on the VPN link.", "hypothesis"),
    ("Open question: should certificates rotate weekly?", "open_question"),
    ("We still need to figure out how to rotate TLS certificates.", "open_question"),
])
def test_cues(user, kind):
    assert kinds(user) == [(kind, user)]


@pytest.mark.parametrize("user", [
    "Have we decided to use Kafka?",  # a question is not a decision
    "let's go with it",  # nothing to remember after the cue
    "What is TCP slow start?",
    "We haven't decided anything yet.",
])
def test_no_note(user):
    assert extract_notes(user, "") == []


def test_assistant_may_conclude_but_not_decide_for_the_user():
    got = kinds("thanks", "We decided to use Redis. I think UDP fits. So the conclusion is that QUIC helps. "
                          "Open question: does the proxy support HTTP/3?")
    assert got == [("conclusion", "So the conclusion is that QUIC helps."),
                   ("open_question", "Open question: does the proxy support HTTP/3?")]


def test_several_notes_in_one_turn_deduplicated():
    got = extract_notes("We decided to use TLS 1.3. I think HSTS preload is safe.",
                        "In conclusion, TLS 1.3 removes RSA key exchange. We decided to use TLS 1.3.")
    assert [n.kind for n in got] == ["decision", "hypothesis", "conclusion"]


def test_concepts():
    assert extract_concepts('Use "retry budget" with TCP and HTTP/2 on PostgreSQL replicas') == (
        "retry budget", "TCP", "HTTP/2", "PostgreSQL", "replicas")
    (note,) = extract_notes("So the conclusion is that HSTS preload needs a max-age of one year.")
    assert {"HSTS", "preload", "max-age"} <= set(note.concepts)
    assert "conclusion" not in {c.lower() for c in note.concepts}


def test_recap_topic():
    assert recap_topic("What did we decide about the database?") == ("the database", frozenset({"decision"}))
    assert recap_topic("open questions about TLS") == ("TLS", frozenset({"open_question"}))
    assert recap_topic("recap") == ("", frozenset())
    assert recap_topic("tell me about TCP") == ("tell me about TCP", frozenset())


@pytest.fixture
def notes(tmp_path, embedder):
    store = SQLiteStore(tmp_path / "n.db")
    mem = NotesMemory(store, embedder, Settings(db=store.location))
    turns = [("We decided to use PostgreSQL for the event store database.", ""),
             ("I think the database latency comes from connection pooling.", ""),
             ("Let's go with HSTS preload for the web app, with a max-age of one year.", ""),
             ("Open question: how do we rotate TLS certificates without downtime?", ""),
             ("", "So the conclusion is that the TCP retransmission timer is too aggressive.")]
    for i, (user, assistant) in enumerate(turns):
        mem.add("alice", "c1" if i < 3 else "c2", extract_notes(user, assistant), now=1000.0 + i)
    mem.add("bob", "c9", extract_notes("We decided to use MongoDB for the event store database.", ""))
    yield mem
    store.close()


def test_add_stores_one_document_per_note(notes):
    listed = notes.list("alice")
    assert [n.source for n in listed] == ["note:c1:1", "note:c1:2", "note:c1:3", "note:c2:1", "note:c2:2"]
    assert [n.kind for n in listed] == ["decision", "hypothesis", "decision", "open_question", "conclusion"]
    assert all(n.user_id == "alice" for n in listed) and listed[0].created_at == 1000.0
    assert "PostgreSQL" in listed[0].concepts
    assert [n.user_id for n in notes.list("bob")] == ["bob"]


def test_what_did_we_decide_about_x(notes):
    hits = notes.search("alice", "What did we decide about the database?")
    assert hits[0].note.text.startswith("We decided to use PostgreSQL")
    assert hits[0].score > hits[0].similarity  # decision kind and concept boosts
    assert all("MongoDB" not in h.note.text for h in hits)  # bob's decision never shows
    assert notes.search("alice", "What did we decide about HSTS?")[0].note.kind == "decision"
    assert notes.search("alice", "open questions about TLS")[0].note.kind == "open_question"


def test_search_scores_are_similarity_plus_boosts(notes):
    s = notes.settings
    for hit in notes.search("alice", "what did we conclude about TCP?", k=5):
        assert hit.similarity >= s.memory_floor_notes
        allowed = (0.0, s.memory_notes_concept_boost, s.memory_notes_kind_boost,
                   s.memory_notes_concept_boost + s.memory_notes_kind_boost)
        assert any(hit.score - hit.similarity == pytest.approx(b) for b in allowed)


def test_recap_without_topic_returns_recent_notes_of_the_asked_kind(notes):
    hits = notes.search("alice", "What did we decide?")
    assert [h.via for h in hits] == ["recent", "recent"]
    assert [h.note.source for h in hits] == ["note:c1:3", "note:c1:1"]
    assert [h.note.kind for h in notes.search("alice", "recap", k=2)] == ["conclusion", "open_question"]


def test_floor_drops_unrelated(notes):
    assert notes.search("alice", "best pasta recipe with basil") == ()


def test_other_user_sees_nothing_and_forget(notes):
    assert notes.search("carol", "What did we decide about the database?") == ()
    assert notes.search("carol", "recap") == ()
    assert notes.forget("alice") == 5
    assert notes.list("alice") == [] and len(notes.list("bob")) == 1


def test_add_nothing(notes):
    assert notes.add("alice", "c1", []) == []
    assert notes.add("alice", "c1", [Note("decision", "We decided to use gRPC.")]) == ["note:c1:4"]
