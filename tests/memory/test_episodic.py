"""The episodic tier: per-user episodes over hybrid search (SQLite and PostgreSQL), the gate, multi-hop."""

from __future__ import annotations

from datetime import datetime


from bara.decide.policy import PolicyDecision, apply_episodic, episodic_signals
from bara.memory.episodic import EpisodicMemory, Turn, joins_facts, mentioned
from bara.settings import Settings

WHEN = datetime(2023, 5, 8, 13, 56)
ALICE = [Turn("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful.", "D1:3"),
         Turn("Melanie", "Wow, that's great! What happened there?", "D1:4"),
         Turn("Caroline", "People shared their transgender stories; I felt accepted.", "D1:5"),
         Turn("Melanie", "I painted a lake sunrise last year, it was my first painting.", "D1:6")]
BOB = [Turn("Dave", "I adopted a puppy named Rex two weeks ago.", "D1:1"),
       Turn("Jon", "I went to a support group for dancers yesterday.", "D1:2")]


def _check_scoping(store, embedder):
    mem = EpisodicMemory(store, embedder, Settings())
    mem.add_session("alice", "c1", "s1", ALICE, WHEN)
    mem.add_session("bob", "c9", "s1", BOB, datetime(2023, 6, 1))
    with store.scoped(["alice"]):
        hits = mem.search("alice", "When did Caroline go to the support group?").hits
        assert hits and hits[0].turn_id.split("|")[0] == "D1:3"
        assert "7 May 2023" in hits[0].text and hits[0].date == "8 May 2023"
        assert all(h.source.startswith("ep:c1:") for h in hits)
        assert mem.people("alice") == {"Caroline", "Melanie"}
    with store.scoped(["bob"]):
        bob = mem.search("bob", "support group yesterday").hits
        assert bob and all("Caroline" not in h.text and h.source.startswith("ep:c9:") for h in bob)
        assert mem.people("bob") == {"Dave", "Jon"}
        assert "18 May 2023" in " ".join(h.text for h in mem.search("bob", "when was the puppy adopted").hits)
    with store.scoped(["alice"]):
        assert mem.forget("alice") == 1
        assert mem.search("alice", "support group").hits == () and mem.people("alice") == frozenset()
    with store.scoped(["bob"]):
        assert mem.search("bob", "puppy Rex").hits


def test_two_users_never_see_each_others_episodes_sqlite(tmp_path, embedder):
    from bara.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "m.db")
    try:
        _check_scoping(store, embedder)
    finally:
        store.close()


def test_two_users_never_see_each_others_episodes_postgres(pg_store_factory, embedder):
    store = pg_store_factory(dim=embedder.dim)
    _check_scoping(store, embedder)
    mem = EpisodicMemory(store, embedder, Settings())
    mem.add_session("bob", "c9", "s2", BOB, WHEN)
    with store.scoped(["alice"]):  # row-level security: the session table shows alice nothing of bob's
        assert store.query("SELECT user_id FROM episodic_sessions") == []


def test_gate_opens_the_tier_for_personal_and_when_questions_only():
    s, people = Settings(), frozenset({"Caroline", "Melanie"})
    for question in ("When did Caroline go to the support group?", "What did Melanie paint last year?",
                     "Do you remember what I said about the lake?", "what did we talk about on Friday?",
                     "Would Caroline's kids like the beach?", "What did Mel and her kids make?"):
        d = apply_episodic(PolicyDecision(), question, people, s)
        assert d.inject_episodic and d.episodic_k == s.memory_episodic_k and d.retrieves, question
        assert any(r.startswith("episodic:") for r in d.reasons)
    for question in ("What does RFC 7230 say about the Host header?", "How does TCP slow start work?",
                     "When was TLS 1.2 published?", "Who is Caroline Herschel?"):
        people_here = frozenset() if "Herschel" in question else people
        d = apply_episodic(PolicyDecision(), question, people_here, s)
        assert not d.inject_episodic and d.reasons == (), question
    private = apply_episodic(PolicyDecision(route="privacy", privacy_mode=True), "What did Caroline say?", people, s)
    assert not private.inject_episodic
    assert episodic_signals("How does TCP work?", {"Howard"}) == ()  # a first word is not a short name
    assert episodic_signals("When did I meet Caroline?", people) == ("episodic:names_known_person",
                                                                        "episodic:recall_cue")


def test_multi_hop_round_is_capped_and_traced(tmp_path, embedder):
    from bara.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "m.db")
    turns = [Turn("Caroline", "My friend Jolene gave me a necklace from Sweden.", "D1:1"),
             Turn("Melanie", "That is lovely.", "D1:2"),
             Turn("Caroline", "Jolene and I went hiking in the Rockies last summer.", "D2:1"),
             Turn("Caroline", "Sweden is where my grandma lives; I visit Stockholm often.", "D3:1"),
             Turn("Melanie", "I bought a new guitar.", "D3:2")]
    question = "What activities has Caroline done with her friends?"
    assert joins_facts(question) and not joins_facts("When did Caroline go to the support group?")
    for cap in (0, 1, 2):
        mem = EpisodicMemory(store, embedder, Settings(memory_episodic_hop_queries=cap))
        mem.add_session("alice", "c1", "s1", turns, WHEN)
        result = mem.search("alice", question)
        assert len(result.hop_queries) <= cap
        if cap:
            assert result.reasons and result.reasons[0].startswith("episodic:hop2_")
            assert all(q.startswith(question) for q in result.hop_queries)
        else:
            assert result.hop_queries == ()
            assert not any(r.startswith("episodic:hop2_") for r in result.reasons)  # issue 38 adds its own
    names = EpisodicMemory(store, embedder, Settings()).names("alice")
    assert {"Caroline", "Melanie", "Jolene", "Sweden", "Stockholm", "Rockies"} <= names
    assert not names & {"My", "That", "Jolene and"}  # first words of sentences are not names
    assert "Jolene" in mentioned("My friend Jolene gave me a necklace from Sweden.")
    assert "7 May 2023" in mentioned("I went there yesterday (7 May 2023).")
    store.close()


def test_pipeline_consults_episodes_for_personal_questions_not_kb_questions(tmp_path, embedder, rfc_kb):
    from bara.app import Bara
    from bara.turn.gated import Assistant

    settings = Settings(db=str(rfc_kb("episodic")), cache_dir=tmp_path)
    with Bara(settings, embedder=embedder) as bara:
        assistant = Assistant(bara)
        assistant.episodic.add_session("sam", "old", "s1", ALICE, WHEN)
        personal = assistant.turn("sam", "When did Caroline go to the LGBTQ support group?").trace
        assert "episodic:names_known_person" in personal.reasons
        assert any(h.tier == "episodic" and "support group" in h.title for h in personal.memory_hits)
        assert personal.latency_ms.get("retrieve_episodic", 0) > 0
        kb = assistant.turn("sam", "What does the HSTS max-age directive mean?").trace
        assert not any(r.startswith("episodic:") for r in kb.reasons)
        assert not any(h.tier == "episodic" for h in kb.memory_hits)
        # what the user says is remembered as an episode of today, for later conversations
        assert any(s.startswith("t") for _, s, _, _ in assistant.episodic.sessions("sam"))


def test_an_evaluation_run_leaves_no_episodic_memory_behind(tmp_path, embedder, rfc_kb):
    """``forget_user`` (between evaluation tasks) deletes the user's episodes, their session rows and
    their name index, not only the chunks: a later task of the same user would otherwise know names."""
    from bara.app import Bara
    from bara.eval.conversation_replay import forget_user
    from bara.turn.gated import Assistant

    with Bara(Settings(db=str(rfc_kb("episodic-forget")), cache_dir=tmp_path), embedder=embedder) as bara:
        assistant = Assistant(bara)
        assistant.episodic.add_session("sam", "old", "s1", ALICE, WHEN)
        assistant.turn("sam", "My friend Jolene visited Stockholm.")
        bara.flush()
        counts = "SELECT (SELECT COUNT(*) FROM episodic_sessions), (SELECT COUNT(*) FROM episodic_names)"
        assert all(n > 0 for n in bara.store.query(counts)[0])
        forget_user(assistant, "sam")
        assert bara.store.query(counts)[0] == (0, 0) and assistant.episodic.names("sam") == frozenset()


def test_the_conversation_under_way_is_left_to_its_own_history(tmp_path, embedder):
    """Episodes exist for *other* conversations: the one under way is already in the prompt's history,
    so its turns are neither searched nor counted as names the gate knows."""
    from bara.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "m.db")
    try:
        mem = EpisodicMemory(store, embedder, Settings())
        mem.add_session("alice", "old", "s1", ALICE, WHEN)
        mem.add_session("alice", "now", "s1", BOB, WHEN)
        everything = mem.search("alice", "support group yesterday").hits
        assert {h.source.split(":")[1] for h in everything} == {"old", "now"}
        elsewhere = mem.search("alice", "support group yesterday", exclude_conversation="now").hits
        assert elsewhere and all(h.source.startswith("ep:old:") for h in elsewhere)
        assert "Rex" not in " ".join(h.text for h in mem.search("alice", "puppy Rex", exclude_conversation="now").hits)
        assert "Dave" in mem.names("alice") and "Dave" not in mem.names("alice", exclude_conversation="now")
        assert mem.holds_other("alice", "now") and mem.holds_other("alice", "old")
        solo = EpisodicMemory(store, embedder, Settings())
        solo.add_session("carol", "only", "s1", BOB, WHEN)
        assert not solo.holds_other("carol", "only") and solo.holds_other("carol", "another")
    finally:
        store.close()
