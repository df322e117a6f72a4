"""Tests for the realistic one-line bugs no earlier test noticed (issue 15, "Tests that catch more").

Each pins a boundary or says *which* item is affected, so an off-by-one or a reversed order fails:
the similarity floor keeps a hit exactly at the floor, the prompt budget drops the worst-ranked
passage first, a greeting attached to a question the rules recognise still retrieves, and the
follow-up threshold is checked with messages scoring just below and just above it (not 1.0).
(Row-level security failing closed on every connection state is in test_faults_identity.py.)
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from bara.decide import decide
from bara.prompts.frames import NoteItem, PromptInputs, QAItem, Source, assemble, build_frames
from bara.settings import Settings
from kb_helpers import retriever_over
from bara.types import Status, Utterance
from bara.understand.features import compute_features

TEXTS = {
    "tcp.txt": "TCP uses a retransmission timer. When the timer expires the segment is sent again.\n\n"
               "Fast retransmit reacts to three duplicate acknowledgements before the timer expires.",
    "dns.txt": "The Domain Name System maps host names to addresses. Resolvers query name servers.",
    "hsts.txt": "HTTP Strict Transport Security lets a web site declare that browsers must only use HTTPS.",
}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory, embedder):
    with retriever_over(tmp_path_factory.mktemp("gaps"), TEXTS, embedder) as retriever:
        yield retriever


# ------------------------------------------------------------------------------ floor boundary
def test_a_hit_exactly_at_the_floor_is_kept_and_one_just_above_it_drops_it(retriever):
    """The rule (hybrid._select, docs/retrieval.md): keep ``similarity >= floor``; drop below."""
    everything = retriever.search("How does TCP resend a lost segment?", k=10, floor=-1.0)
    sims = sorted({h.similarity for h in everything.hits}, reverse=True)
    assert len(sims) >= 3
    middle = sims[1]
    at = retriever.search("How does TCP resend a lost segment?", k=10, floor=middle)
    assert {h.similarity for h in at.hits} == {s for s in sims if s >= middle}  # the equal one is kept
    assert middle in {h.similarity for h in at.hits}
    assert at.n_dropped == len([h for h in everything.hits if h.similarity < middle])
    above = retriever.search("How does TCP resend a lost segment?", k=10, floor=middle + 1e-6)
    assert middle not in {h.similarity for h in above.hits}
    assert middle in {h.similarity for h in above.dropped}


def test_a_floor_above_every_hit_is_empty_with_its_reason(retriever):
    top = retriever.search("How does TCP resend a lost segment?", k=10, floor=-1.0).hits[0].similarity
    out = retriever.search("How does TCP resend a lost segment?", k=10, floor=top + 1e-6)
    assert out.status == Status.EMPTY and "all_below_floor" in out.reasons and out.n_dropped >= 1


# ----------------------------------------------------------------------------- prompt budget
def _source(n: int, score: float) -> Source:
    return Source(n, n, f"doc{n}.txt", str(n), f"Part {n}", f"passage number {n} " + "word " * 40, score)


def _inputs(**changes) -> PromptInputs:
    base = PromptInputs(message="What does the max-age directive do?", kb_opened=True,
                        knowledge=tuple(_source(n, 1.0 - n / 10) for n in (1, 2, 3, 4)))
    return replace(base, **changes)


def _tokens(inputs: PromptInputs) -> int:
    return sum(f.tokens for f in build_frames(inputs))


@pytest.mark.parametrize("drop", [1, 2, 3])
def test_budget_drops_the_worst_ranked_passages_first(drop):
    inputs = _inputs()
    budget = _tokens(replace(inputs, knowledge=inputs.knowledge[:4 - drop]))
    prompt = assemble(inputs, budget)
    assert [s.n for s in prompt.inputs.knowledge] == list(range(1, 5 - drop))  # best kept, worst gone
    assert prompt.reasons == ("budget:kb_dropped",)


def test_budget_drops_the_worst_ranked_notes_and_qa_first():
    notes = tuple(NoteItem("decision", f"decision number {n} " + "word " * 30, 1.0 - n / 10) for n in (1, 2, 3))
    qa = tuple(QAItem(f"question {n}?", f"answer {n} " + "word " * 30, 1.0 - n / 10) for n in (1, 2, 3))
    inputs = _inputs(knowledge=(), notes=notes, qa=qa)
    prompt = assemble(inputs, _tokens(replace(inputs, qa=qa[:1])))
    assert prompt.inputs.qa == qa[:1] and prompt.inputs.notes == notes  # Q&A gives way before notes
    prompt = assemble(inputs, _tokens(replace(inputs, qa=(), notes=notes[:2])))
    assert prompt.inputs.qa == () and prompt.inputs.notes == notes[:2]


# ------------------------------------------------------------ greeting attached to a question
GREETED_QUESTIONS = [
    "hey, define the word MUST in RFC 2119",
    "Good morning, what is certificate pinning?",
    "Hi! What is HTTP Strict Transport Security?",
    "Hello, how does TCP detect a lost segment?",
    "Hey! Quick question: how do browsers verify server identity?",
]


def test_a_greeting_attached_to_a_recognised_question_still_retrieves():
    settings, recognised = Settings(), []
    for message in GREETED_QUESTIONS:
        gate = decide(message, [], None, {}, settings)
        assert gate.features.is_greeting, message  # the greeting is seen...
        if gate.intent.source.startswith("rule:") and gate.intent.intent != "general":
            recognised.append(message)  # ...and a question the rules recognise is still answered from the KB
            assert gate.behavior.mode != "greeting" and gate.policy.inject_kb, (message, gate.reasons)
            assert not any(r.startswith("retrieval:skipped") for r in gate.reasons), gate.reasons
    assert len(recognised) >= 2  # not vacuous: the rules do recognise these questions
    assert any("?" not in m for m in recognised)  # including one without a question mark


def test_a_bare_greeting_still_skips_retrieval():
    gate = decide("hello, nice to meet you", [], None, {}, Settings())
    assert gate.behavior.mode == "greeting" and not gate.policy.inject_kb


# ---------------------------------------------------------------- follow-up threshold, near it
HISTORY = [Utterance("user", "What is HSTS?"), Utterance("assistant", "HSTS is a policy a site declares.")]
NEAR = ["Tell me more about the preload list",  # one strong cue
        "also how does TLS certificate validation work in browsers",  # one strong cue
        "What does that directive mean for subdomains?"]  # one weak cue
OVER = ["And what about it?", "And the max-age directive of HSTS, how is it set?"]  # a weak and a strong cue


def test_followup_threshold_with_scores_just_below_and_above_it():
    s = Settings()
    below = [compute_features(m, HISTORY, {}, settings=s) for m in NEAR]
    above = [compute_features(m, HISTORY, {}, settings=s) for m in OVER]
    assert all(0 < f.followup_score < s.gate_followup_threshold for f in below), [f.followup_score for f in below]
    assert all(s.gate_followup_threshold <= f.followup_score < 1.0 for f in above), [f.followup_score for f in above]
    assert not any(f.is_followup for f in below) and all(f.is_followup for f in above)


def test_a_score_equal_to_the_threshold_is_a_followup():
    score = compute_features(NEAR[0], HISTORY, {}).followup_score
    assert 0 < score < 1.0
    assert compute_features(NEAR[0], HISTORY, {}, settings=Settings(gate_followup_threshold=score)).is_followup
    nudged = Settings(gate_followup_threshold=min(1.0, score + 0.01))
    assert not compute_features(NEAR[0], HISTORY, {}, settings=nudged).is_followup


def test_no_history_means_no_followup_however_it_is_worded():
    for message in NEAR + OVER:
        features = compute_features(message, [], {})
        assert features.followup_score == 0 and not features.is_followup


def test_timings_and_rerank_shows_every_survivor(retriever):
    out = retriever.search("How does TCP resend a lost segment?", k=1, floor=-1.0)
    assert {"embed", "fetch"} <= set(out.timings_ms)
    assert all(0 <= out.timings_ms[key] < 600_000 for key in ("embed", "fetch"))
    assert len(out.hits) == 1 and len(out.dropped) == 0
    reranked = retriever.search("How does TCP resend a lost segment?", k=1, floor=-1.0, rerank=True)
    assert len(reranked.hits) == 1  # the passthrough reranker keeps the order, the cut stays at k


def test_topic_similarity_is_a_clipped_cosine_of_unnormalised_vectors():
    import numpy as np

    from bara.understand.features import topic_similarity

    assert topic_similarity(np.array([3.0, 0.0]), [np.array([2.0, 0.0])]) == 1.0
    assert topic_similarity(np.array([0.0, 3.0]), [np.array([2.0, 0.0])]) == 0.0
    assert topic_similarity(np.array([-3.0, 0.0]), [np.array([2.0, 0.0])]) == -1.0
    assert topic_similarity(np.array([1.0, 1.0]), [np.array([2.0, 0.0])]) == pytest.approx(2 ** -0.5, abs=1e-6)
    assert topic_similarity(np.array([1, 1]), [np.array([4, 0]), np.array([0, 4])]) == pytest.approx(1.0, abs=1e-6)
    assert topic_similarity(np.array([0.0, 0.0]), [np.array([2.0, 0.0])]) is None
    assert topic_similarity(np.array([1.0, 0.0]), []) is None and topic_similarity(None, [np.ones(2)]) is None
